package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// surface is what one package exports.
type surface struct {
	types, funcs, methods, values int
}

func (s surface) total() int { return s.types + s.funcs + s.methods + s.values }

// count parses every package under root and returns its surface by import path relative
// to the module root.
func count(root string) (map[string]surface, error) {
	out := map[string]surface{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		base := d.Name()
		if rel != "." && (strings.HasPrefix(base, ".") || base == "testdata") {
			return filepath.SkipDir
		}
		if rel == "internal" || strings.HasPrefix(rel, "internal/") {
			return nil
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		var files []*ast.File
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(path, e.Name()), nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			if f.Name.Name != "main" {
				files = append(files, f)
			}
		}
		if len(files) > 0 {
			out[rel] = surfaceOf(files)
		}
		return nil
	})
	return out, err
}

func surfaceOf(files []*ast.File) surface {
	var s surface
	exportedTypes := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, sp := range g.Specs {
					if ts := sp.(*ast.TypeSpec); ts.Name.IsExported() {
						exportedTypes[ts.Name.Name] = true
					}
				}
			}
		}
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					s.funcs++
				} else if exportedTypes[recvName(d.Recv.List[0].Type)] {
					s.methods++
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if sp.Name.IsExported() {
							s.types++
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.IsExported() {
								s.values++
							}
						}
					}
				}
			}
		}
	}
	return s
}

// recvName is the type name of a method receiver (T, *T, T[K], *T[K]).
func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: apisurface TREE [AFTER_TREE]")
		os.Exit(2)
	}
	var trees []map[string]surface
	for _, root := range os.Args[1:] {
		s, err := count(root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apisurface:", err)
			os.Exit(1)
		}
		trees = append(trees, s)
	}
	names := map[string]bool{}
	for _, t := range trees {
		for p := range t {
			names[p] = true
		}
	}
	pkgs := make([]string, 0, len(names))
	for p := range names {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	cell := func(s surface, ok bool) string {
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%d (%d types, %d funcs, %d methods, %d consts/vars)", s.total(), s.types, s.funcs, s.methods, s.values)
	}
	if len(trees) == 1 {
		fmt.Println("| package | exported identifiers |")
		fmt.Println("|---|---|")
	} else {
		fmt.Println("| package | before | after |")
		fmt.Println("|---|---|---|")
	}
	for _, p := range pkgs {
		fmt.Printf("| %s |", p)
		for _, t := range trees {
			s, ok := t[p]
			fmt.Printf(" %s |", cell(s, ok))
		}
		fmt.Println()
	}
}
