package zmtp

import (
	"fmt"
	"net"
	"strings"
)

// TCPAddress turns a ZeroMQ TCP endpoint ("tcp://host:port", "tcp://*:port") into the
// address net.Listen and net.Dial take ("*" means every interface).
func TCPAddress(endpoint string) (string, error) {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return "", fmt.Errorf("zmtp: endpoint %q: only tcp:// is supported", endpoint)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", fmt.Errorf("zmtp: endpoint %q: %w", endpoint, err)
	}
	if host == "*" {
		host = ""
	}
	return net.JoinHostPort(host, port), nil
}
