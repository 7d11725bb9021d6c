package psp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/examples/payments/psp"
)

func start(t *testing.T, cfg psp.Config) (*psp.Server, *psp.Client) {
	t.Helper()
	s, err := psp.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, psp.NewClient(s.URL(), 2*time.Second)
}

var req = psp.ChargeRequest{Amount: 1250, Currency: "EUR", Reference: "pay_1"}

func TestIdempotentCharge(t *testing.T) {
	t.Parallel()
	s, c := start(t, psp.Config{})
	ctx := context.Background()
	first, err := c.Charge(ctx, "charge-pay_1", req)
	if err != nil || first.Status != psp.StatusSucceeded {
		t.Fatalf("first charge = %+v, %v", first, err)
	}
	second, err := c.Charge(ctx, "charge-pay_1", req)
	if err != nil || second.ID != first.ID || second.Status != psp.StatusSucceeded {
		t.Fatalf("second charge with the same key = %+v, %v; want the original %s", second, err, first.ID)
	}
	st := s.Stats()
	if st.Charges != 1 || st.Replays != 1 || st.DoubleCharges != 0 || s.CapturedFor("pay_1") != 1 || len(s.Ledger()) != 1 {
		t.Fatalf("stats %+v, ledger %d entries: want one charge, one replay", st, len(s.Ledger()))
	}
	// The same key with other parameters is refused, not charged.
	other := req
	other.Amount = 999
	var perr *psp.Error
	if _, err := c.Charge(ctx, "charge-pay_1", other); !errors.As(err, &perr) || perr.StatusCode != 422 || psp.IsRetryable(err) {
		t.Fatalf("same key, other amount = %v, want a non-retryable 422", err)
	}
	// A different key for the same reference is a second charge: the ledger sees it.
	if _, err := c.Charge(ctx, "another-key", req); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.DoubleCharges != 1 || s.CapturedFor("pay_1") != 2 {
		t.Fatalf("after a charge under a second key: %+v, want the double charge detected", st)
	}
	refunded, err := c.Refund(ctx, first.ID)
	if err != nil || !refunded.Refunded {
		t.Fatalf("refund = %+v, %v", refunded, err)
	}
	if again, err := c.Refund(ctx, first.ID); err != nil || !again.Refunded || s.Stats().Refunds != 1 {
		t.Fatalf("second refund = %+v, %v, refunds %d; want one refund", again, err, s.Stats().Refunds)
	}
}

func TestLostResponseThenLookup(t *testing.T) {
	t.Parallel()
	s, c := start(t, psp.Config{LostResponseRate: 1})
	ctx := context.Background()
	if _, err := c.Lookup(ctx, "charge-pay_1"); !errors.Is(err, psp.ErrNotFound) {
		t.Fatalf("lookup before any charge = %v, want ErrNotFound", err)
	}
	_, err := c.Charge(ctx, "charge-pay_1", req)
	if err == nil || !psp.IsRetryable(err) {
		t.Fatalf("charge with its response lost = %v, want a retryable error", err)
	}
	// The caller does not know; the PSP does.
	got, err := c.Lookup(ctx, "charge-pay_1")
	if err != nil || got.Status != psp.StatusSucceeded || got.Reference != "pay_1" {
		t.Fatalf("lookup after the lost response = %+v, %v; want succeeded", got, err)
	}
	// Retrying with the same key answers with the original charge.
	again, err := c.Charge(ctx, "charge-pay_1", req)
	if err != nil || again.ID != got.ID {
		t.Fatalf("retry = %+v, %v; want the original charge %s", again, err, got.ID)
	}
	if st := s.Stats(); st.Charges != 1 || st.LostResponses != 1 || st.Replays != 1 || s.CapturedFor("pay_1") != 1 {
		t.Fatalf("stats %+v: want one charge, one lost response, one replay", st)
	}
}

func TestDeclinesAndErrors(t *testing.T) {
	t.Parallel()
	s, c := start(t, psp.Config{DeclineRate: 1})
	got, err := c.Charge(context.Background(), "k", req)
	if err != nil || got.Status != psp.StatusDeclined || got.DeclineCode == "" || s.CapturedFor("pay_1") != 0 {
		t.Fatalf("declined charge = %+v, %v", got, err)
	}
	s2, c2 := start(t, psp.Config{ErrorRate: 1})
	if _, err := c2.Charge(context.Background(), "k", req); !psp.IsRetryable(err) {
		t.Fatalf("injected error = %v, want retryable", err)
	}
	if len(s2.Ledger()) != 0 {
		t.Fatalf("an injected error recorded a charge")
	}
}

func TestSlowResponseOutlastsTimeout(t *testing.T) {
	t.Parallel()
	s, err := psp.Start(psp.Config{SlowRate: 1, SlowDelay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := psp.NewClient(s.URL(), 100*time.Millisecond)
	if _, err := c.Charge(context.Background(), "k", req); !psp.IsRetryable(err) {
		t.Fatalf("slow charge = %v, want a retryable timeout", err)
	}
	// The PSP finishes what it started.
	deadline := time.Now().Add(5 * time.Second)
	for s.CapturedFor("pay_1") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the slow charge never completed at the PSP")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
