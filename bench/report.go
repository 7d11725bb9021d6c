package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// sample is one round's figure for one engine.
type sample struct {
	value       float64
	goCPUPerJob float64 // µs of this process's CPU per job
	pgCPUPerJob float64 // µs of database server CPU per job (every server process)
	// pgFaultsPerJob is the database server's minor page faults per job.
	pgFaultsPerJob float64
	peakRSSBytes   int64
}

// series are an engine's samples in a mode, in run order.
type series struct {
	engine  string
	samples []sample
}

func (s *series) values() []float64 {
	out := make([]float64, len(s.samples))
	for i, x := range s.samples {
		out[i] = x.value
	}
	return out
}

// spread returns min, median and max.
func spread(v []float64) (lo, med, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return s[0], med, s[n-1]
}

func median(v []float64) float64 {
	_, m, _ := spread(v)
	return m
}

// printThroughput prints one line per engine: min/median/max of the figure,
// the ratio of its median to each peer's median, the peak RSS of its worst
// round and its CPU per job (median over rounds), the server's too unless
// its label is empty.
func printThroughput(w io.Writer, mode, unit string, all []*series, server dbServer) {
	for _, s := range all {
		lo, med, hi := spread(s.values())
		var b strings.Builder
		fmt.Fprintf(&b, "%-12s %-18s %s min %9.0f  median %9.0f  max %9.0f ", mode, s.engine, unit, lo, med, hi)
		for _, p := range all {
			if p != s {
				fmt.Fprintf(&b, " %s %.2fx", "vs "+p.engine, med/median(p.values()))
			}
		}
		var rss int64
		var goCPU, pgCPU, pgFaults []float64
		for _, x := range s.samples {
			rss = max(rss, x.peakRSSBytes)
			goCPU, pgCPU = append(goCPU, x.goCPUPerJob), append(pgCPU, x.pgCPUPerJob)
			pgFaults = append(pgFaults, x.pgFaultsPerJob)
		}
		fmt.Fprintf(&b, " | peak RSS %d MiB | CPU/job: bench process %.1f µs", rss>>20, median(goCPU))
		if server.label != "" {
			fmt.Fprintf(&b, ", %s %.1f µs (%.2f page faults)", server.label, median(pgCPU), median(pgFaults))
		}
		fmt.Fprintln(w, b.String())
	}
}

// printTraces prints the statement traces of the engines that keep one.
func printTraces(w io.Writer, engines []engine) {
	for _, e := range engines {
		if t, ok := e.(interface{ traceReport(io.Writer) }); ok {
			t.traceReport(w)
		}
	}
}
