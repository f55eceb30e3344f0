package demo

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

// startBroker starts an in-process Kafka broker (franz-go's kfake) on
// 127.0.0.1:port, one node: nothing to install, and real clients (ingest,
// kcat) can connect to it. Port 0 picks a free port. Close the cluster to
// stop it; its data lives in memory only.
func startBroker(port int) (*kfake.Cluster, string, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, "", fmt.Errorf("port %d is taken (a Kafka running already?): pass --port=0 for a free one: %w", port, err)
		}
		return nil, "", fmt.Errorf("start the embedded broker: %w", err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) == 0 {
		c.Close()
		return nil, "", errors.New("the embedded broker listens nowhere")
	}
	if _, _, err := net.SplitHostPort(addrs[0]); err != nil {
		c.Close()
		return nil, "", fmt.Errorf("embedded broker address %q: %w", addrs[0], err)
	}
	return c, addrs[0], nil
}
