package main

import (
	"context"
	"fmt"
	"strings"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// netProxies are Toxiproxy proxies run in the harness process, one per
// worker slot, between that slot's worker and Postgres: a toxic on one
// proxy hits one worker's connections only.
type netProxies struct {
	server  *toxiproxy.ApiServer
	proxies []*toxiproxy.Proxy
}

func startProxies(n int, upstream string) (*netProxies, error) {
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	np := &netProxies{server: server}
	for i := range n {
		p := toxiproxy.NewProxy(server, fmt.Sprintf("pg-w%d", i), "127.0.0.1:0", upstream)
		if err := p.Start(); err != nil {
			np.stop()
			return nil, fmt.Errorf("start proxy %d: %w", i, err)
		}
		np.proxies = append(np.proxies, p)
	}
	return np, nil
}

// addr returns the listen address of slot's proxy.
func (np *netProxies) addr(slot int) string { return np.proxies[slot].Listen }

// add adds a toxic, given as Toxiproxy's JSON, to slot's proxy. It applies
// to the proxy's open connections and to new ones.
func (np *netProxies) add(slot int, toxicJSON string) error {
	_, err := np.proxies[slot].Toxics.AddToxicJson(strings.NewReader(toxicJSON))
	return err
}

// clear removes every toxic from every proxy.
func (np *netProxies) clear() {
	for _, p := range np.proxies {
		p.Toxics.ResetToxics(context.Background())
	}
}

func (np *netProxies) stop() {
	for _, p := range np.proxies {
		p.Stop()
	}
}
