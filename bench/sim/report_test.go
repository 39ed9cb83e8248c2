package sim

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tinyResults(t *testing.T) []*Result {
	t.Helper()
	res, err := Compare(tinyRequests(), tinyConfig(10, 8), []Scheme{
		{Name: OrcaMax}, {Name: OrcaPow2}, {Name: OrcaOracle},
		{Name: Paged, BlockSize: 1}, {Name: Paged, BlockSize: 2}, {Name: Paged, BlockSize: 2, PrefixSharing: true},
	})
	require.NoError(t, err)
	return res
}

func TestJSONReportFields(t *testing.T) {
	res := tinyResults(t)
	rep := &Report{Seed: 42, Version: "test", Flags: map[string]string{"block-size": "16"}, Phase: PhaseNote}
	for _, r := range res {
		rep.Schemes = append(rep.Schemes, RowOf(r))
	}
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, rep))
	var got map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	for _, k := range []string{"seed", "flags", "version", "schemes"} {
		assert.Contains(t, got, k)
	}
	schemes := got["schemes"].([]any)
	require.Len(t, schemes, len(res))
	names := []string{}
	for _, s := range schemes {
		row := s.(map[string]any)
		for _, k := range []string{"name", "block_size", "prefix_sharing", "eviction", "token_utilization", "reserved_fraction",
			"internal_fragmentation", "external_fragmentation", "mean_running", "peak_running", "completed_per_kstep",
			"preemptions", "prefix_hit_rate"} {
			assert.Contains(t, row, k)
		}
		sum := 0.0
		for _, k := range []string{"token_utilization", "reserved_fraction", "internal_fragmentation", "external_fragmentation", "free_fraction"} {
			v := row[k].(float64)
			assert.True(t, v >= 0 && v <= 1, "%s = %v", k, v)
			sum += v
		}
		assert.InDelta(t, 1, sum, 1e-9)
		names = append(names, row["name"].(string))
	}
	assert.Equal(t, []string{"orca-max", "orca-pow2", "orca-oracle", "paged", "paged", "paged"}, names)
	assert.Equal(t, 0.0, schemes[0].(map[string]any)["block_size"])
	assert.Equal(t, "", schemes[0].(map[string]any)["eviction"])
	assert.Equal(t, "none", schemes[3].(map[string]any)["eviction"])
	assert.Equal(t, "lru", schemes[5].(map[string]any)["eviction"])
	assert.Equal(t, true, schemes[5].(map[string]any)["prefix_sharing"])
}

func TestCSVAndTable(t *testing.T) {
	res := tinyResults(t)
	var buf bytes.Buffer
	require.NoError(t, WriteCSV(&buf, res))
	recs, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 1+len(res))
	assert.Equal(t, csvHeader, recs[0])
	assert.Equal(t, "orca-oracle", recs[3][0])
	assert.Equal(t, "0.550000", recs[3][7], "token_utilization of the hand-computed orca-oracle run")

	buf.Reset()
	require.NoError(t, WriteTable(&buf, res))
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	require.Len(t, lines, 1+len(res)+1, "the rows and the note on short phases")
	assert.True(t, strings.HasPrefix(lines[len(lines)-1], "! saturated phase shorter"))
	lines = lines[:len(lines)-1]
	for _, l := range lines[1:] {
		assert.Equal(t, len(lines[1]), len(l), "aligned: %q", l)
	}
	assert.Contains(t, lines[3], "orca-oracle")
	assert.Contains(t, lines[3], " 55.0%")
}

func TestWriteCharts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	files, err := WriteCharts(dir, "tiny", tinyResults(t))
	require.NoError(t, err)
	require.Len(t, files, 4)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		switch filepath.Ext(f) {
		case ".png":
			assert.True(t, bytes.HasPrefix(data, []byte("\x89PNG")), f)
			cfg, err := png.DecodeConfig(bytes.NewReader(data))
			require.NoError(t, err)
			assert.GreaterOrEqual(t, cfg.Width, 1600, "wide enough for a paper: %s", f)
		case ".svg":
			assert.Contains(t, string(data[:min(len(data), 400)]), "<svg", f)
		}
	}
	files, err = WriteCharts(dir, "contiguous only", tinyResults(t)[:3])
	require.NoError(t, err)
	assert.Len(t, files, 2, "no block-size chart without paged runs")
}

// A run whose whole batch fits at once (the "sat steps 3") is flagged in the table,
// the CSV and the JSON; a loaded run is not.
func TestShortPhaseIsFlagged(t *testing.T) {
	w, err := LookupWorkload("sharegpt")
	require.NoError(t, err)
	p := Prepare(w.Generate(100, 42), 2048)
	schemes := []Scheme{{Name: OrcaOracle}, {Name: Paged, BlockSize: 16}}
	roomy, err := Compare(p.Requests, DefaultConfig(1<<20), schemes)
	require.NoError(t, err)
	tight, err := Compare(p.Requests, DefaultConfig(6000), schemes)
	require.NoError(t, err)
	for i := range schemes {
		assert.True(t, roomy[i].ShortPhase, "%s: %d steps", roomy[i].Scheme.Label(), roomy[i].SaturatedSteps)
		assert.Less(t, float64(roomy[i].SaturatedSteps), 2*roomy[i].MeanOutput)
		assert.False(t, tight[i].ShortPhase, "%s: %d steps", tight[i].Scheme.Label(), tight[i].SaturatedSteps)
		assert.Contains(t, RowOf(roomy[i]).Warning, "mostly the ramp-up")
		assert.Empty(t, RowOf(tight[i]).Warning)
	}
	var b strings.Builder
	require.NoError(t, WriteTable(&b, roomy))
	assert.Regexp(t, `(?m) !$`, b.String())
	assert.Contains(t, b.String(), "! saturated phase shorter than 2 request lifetimes")
	b.Reset()
	require.NoError(t, WriteTable(&b, tight))
	assert.NotContains(t, b.String(), "!")
}

// Hybrid rows add the model, layout and state block and a share column per KV-cache
// group, over the union of the rows' groups; other rows leave them empty, and a CSV
// without hybrid rows keeps its columns. The readmissions' re-hit rate and prompt tokens
// (counted apart from the hit rate) are every preempting scheme's, empty for the others.
func TestCSVGroupColumns(t *testing.T) {
	plain := tinyResults(t)[:1]
	h1 := &Result{Scheme: Scheme{Name: Hybrid, Model: "gemma-3-27b", Layout: LayoutCarved, BlockSize: 16, StateBlock: 0},
		Groups: []GroupShare{{Name: "sliding", Share: 0.25}, {Name: "full", Share: 0.5}}}
	h2 := &Result{Scheme: Scheme{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutPerClass, BlockSize: 16, StateBlock: 32},
		Groups:       []GroupShare{{Name: "state", Share: 0.125}, {Name: "full", Share: 0.75}, {Name: "full", Share: 0.0625}},
		ResumedApart: true, ResumedHitRate: 0.875, ResumedPromptTokens: 4000}
	var buf bytes.Buffer
	require.NoError(t, WriteCSV(&buf, append(plain, h1, h2)))
	recs, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	n := len(csvHeader)
	require.Equal(t, []string{"resumed_hit_rate", "resumed_prompt_tokens"}, recs[0][n-2:n])
	require.Equal(t, []string{"model", "layout", "state_block",
		"group_sliding_share", "group_full_share", "group_state_share", "group_full2_share"}, recs[0][n:])
	assert.Equal(t, []string{"", "", "", "", "", "", "", "", ""}, recs[1][n-2:])
	assert.Equal(t, []string{"", "", "gemma-3-27b", "carved", "0", "0.250000", "0.500000", "", ""}, recs[2][n-2:])
	assert.Equal(t, []string{"0.875000", "4000", "jamba-1.5-mini", "per-class", "32", "", "0.750000", "0.125000", "0.062500"}, recs[3][n-2:])

	buf.Reset()
	require.NoError(t, WriteCSV(&buf, plain))
	recs, err = csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	assert.Equal(t, csvHeader, recs[0])
}
