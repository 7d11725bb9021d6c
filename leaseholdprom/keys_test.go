package leaseholdprom_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdprom"
)

// TestCollectorKeys: the key metrics are per queue, never per key: their
// series stay the same when the number of distinct keys grows, and their
// values sum up the keys (distinct keys waiting, most of one key, and a
// histogram of waiting jobs per key).
func TestCollectorKeys(t *testing.T) {
	t.Parallel()
	d, _ := openDB(t)
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	metrics := leaseholdprom.New(nil)
	metrics.Bind(c)
	insert := func(queue, key string, n int) {
		t.Helper()
		params := make([]leasehold.InsertManyParams, n)
		for i := range params {
			params[i] = leasehold.InsertManyParams{Args: promArgs{Mode: "ok"}, InsertOpts: &leasehold.InsertOpts{Queue: queue, Key: key}}
		}
		if _, err := c.InsertMany(t.Context(), params); err != nil {
			t.Fatal(err)
		}
	}
	families := []string{"leasehold_queue_keys_waiting", "leasehold_queue_key_max_waiting_jobs", "leasehold_queue_key_waiting_jobs"}
	// series lists every series of the key families by name and labels,
	// and fails on a label other than queue.
	series := func() map[string]bool {
		t.Helper()
		out := map[string]bool{}
		mfs := gather(t, metrics)
		for _, name := range families {
			for _, m := range mfs[name].GetMetric() {
				if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "queue" {
					t.Fatalf("%s has labels %v, want only queue", name, m.GetLabel())
				}
				out[name+"/"+m.GetLabel()[0].GetValue()] = true
			}
		}
		return out
	}

	for i := range 50 {
		insert("keyed", fmt.Sprintf("cust-%03d", i), 1)
	}
	insert("keyed", "whale", 40)
	insert("plain", "", 3)
	before := series()
	want := map[string]bool{
		"leasehold_queue_keys_waiting/keyed": true, "leasehold_queue_key_max_waiting_jobs/keyed": true, "leasehold_queue_key_waiting_jobs/keyed": true,
		"leasehold_queue_keys_waiting/plain": true, "leasehold_queue_key_max_waiting_jobs/plain": true,
	}
	if fmt.Sprint(before) != fmt.Sprint(want) {
		t.Fatalf("key series = %v, want %v", before, want)
	}
	mfs := gather(t, metrics)
	if v := find(mfs["leasehold_queue_keys_waiting"], map[string]string{"queue": "keyed"}).GetGauge().GetValue(); v != 51 {
		t.Errorf("keys waiting in keyed = %v, want 51", v)
	}
	if v := find(mfs["leasehold_queue_key_max_waiting_jobs"], map[string]string{"queue": "keyed"}).GetGauge().GetValue(); v != 40 {
		t.Errorf("most waiting of one key in keyed = %v, want 40", v)
	}
	if v := find(mfs["leasehold_queue_keys_waiting"], map[string]string{"queue": "plain"}).GetGauge().GetValue(); v != 0 {
		t.Errorf("keys waiting in plain = %v, want 0", v)
	}
	h := find(mfs["leasehold_queue_key_waiting_jobs"], map[string]string{"queue": "keyed"}).GetHistogram()
	if h.GetSampleCount() != 51 || h.GetSampleSum() != 90 {
		t.Errorf("waiting-per-key histogram: count %d, sum %v; want 51 keys, 90 jobs", h.GetSampleCount(), h.GetSampleSum())
	}
	got := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		got[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	if wantB := map[float64]uint64{1: 50, 10: 50, 100: 51, 1000: 51, 10000: 51}; fmt.Sprint(got) != fmt.Sprint(wantB) {
		t.Errorf("waiting-per-key buckets = %v, want %v", got, wantB)
	}

	// Ten times the keys: the same series.
	for i := range 450 {
		insert("keyed", fmt.Sprintf("more-%03d", i), 1)
	}
	if after := series(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("with 501 keys the key series are %v, want the same as with 51: %v", after, before)
	}
	if v := find(gather(t, metrics)["leasehold_queue_keys_waiting"], map[string]string{"queue": "keyed"}).GetGauge().GetValue(); v != 501 {
		t.Errorf("keys waiting in keyed = %v, want 501", v)
	}
}
