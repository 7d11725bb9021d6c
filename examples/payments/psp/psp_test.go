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
	refunded, err := c.Refund(ctx, "refund-pay_1", first.ID)
	if err != nil || !refunded.Refunded {
		t.Fatalf("refund = %+v, %v", refunded, err)
	}
	if again, err := c.Refund(ctx, "refund-pay_1", first.ID); err != nil || !again.Refunded || s.Stats().Refunds != 1 || s.Stats().DoubleRefunds != 0 {
		t.Fatalf("refund replayed with its key = %+v, %v, stats %+v; want one refund", again, err, s.Stats())
	}
	// Another key for a refunded charge is a double refund: refused, final, counted.
	if _, err := c.Refund(ctx, "refund-again", first.ID); !errors.As(err, &perr) || perr.Code != "already_refunded" || psp.IsRetryable(err) {
		t.Fatalf("refund under a second key = %v, want a final already_refunded", err)
	}
	// A charge not captured cannot be refunded: refused, final, counted.
	auth, err := c.Authorize(ctx, "charge-pay_2", psp.ChargeRequest{Amount: 100, Currency: "EUR", Reference: "pay_2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refund(ctx, "refund-pay_2", auth.ID); !errors.As(err, &perr) || perr.Code != "not_refundable" || psp.IsRetryable(err) {
		t.Fatalf("refund of an authorization = %v, want a final not_refundable", err)
	}
	if st := s.Stats(); st.Refunds != 1 || st.DoubleRefunds != 1 || st.RefundsBeforeCapture != 1 {
		t.Fatalf("stats %+v: want 1 refund, 1 double refund, 1 refund before capture", st)
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

// TestMerchantRateLimit: requests of a merchant over its limit in one
// window get a retryable 429 and charge nothing; another merchant and
// requests without a merchant are not limited.
func TestMerchantRateLimit(t *testing.T) {
	t.Parallel()
	s, c := start(t, psp.Config{MerchantRateLimit: 2, MerchantRatePeriod: time.Hour})
	ctx := context.Background()
	charge := func(ref, merchant string) error {
		_, err := c.Charge(ctx, "charge-"+ref, psp.ChargeRequest{Amount: 100, Currency: "EUR", Reference: ref, Merchant: merchant})
		return err
	}
	for _, ref := range []string{"a1", "a2"} {
		if err := charge(ref, "m-a"); err != nil {
			t.Fatalf("charge %s within the limit: %v", ref, err)
		}
	}
	var perr *psp.Error
	if err := charge("a3", "m-a"); !errors.As(err, &perr) || perr.StatusCode != 429 || !psp.IsRetryable(err) {
		t.Fatalf("third charge of m-a in the window = %v, want a retryable 429", err)
	}
	if err := charge("b1", "m-b"); err != nil {
		t.Fatalf("charge of another merchant: %v", err)
	}
	if err := charge("n1", ""); err != nil {
		t.Fatalf("charge without a merchant: %v", err)
	}
	if st := s.Stats(); st.RateLimited != 1 || st.Charges != 4 || s.CapturedFor("a3") != 0 {
		t.Fatalf("stats %+v: want 1 rate-limited request, 4 charges, nothing for a3", st)
	}
	// Captures and refunds count against the merchant of their charge.
	auth, err := c.Authorize(ctx, "charge-b2", psp.ChargeRequest{Amount: 100, Currency: "EUR", Reference: "b2", Merchant: "m-b"})
	if err != nil {
		t.Fatalf("authorization of m-b, its second request: %v", err)
	}
	if _, err := c.Capture(ctx, "capture-b2", auth.ID); !errors.As(err, &perr) || perr.StatusCode != 429 {
		t.Fatalf("capture of m-b over its limit = %v, want 429", err)
	}
	if _, err := c.Refund(ctx, "refund-b2", auth.ID); !errors.As(err, &perr) || perr.StatusCode != 429 {
		t.Fatalf("refund of m-b over its limit = %v, want 429", err)
	}
	if st := s.Stats(); st.RateLimited != 3 || st.Captures != 0 || st.RefundsBeforeCapture != 0 {
		t.Fatalf("stats %+v: want 3 rate-limited requests, no capture, no refund seen", st)
	}
}

// TestCustomerOverlaps: a charge request of a customer that arrives while
// another of the same customer is being answered is counted; one after the
// other, or of different customers, are not.
func TestCustomerOverlaps(t *testing.T) {
	t.Parallel()
	s, c := start(t, psp.Config{MinLatency: 200 * time.Millisecond, MaxLatency: 200 * time.Millisecond})
	ctx := context.Background()
	charge := func(ref, customer string) error {
		_, err := c.Charge(ctx, "charge-"+ref, psp.ChargeRequest{Amount: 100, Currency: "EUR", Reference: ref, Customer: customer})
		return err
	}
	if err := charge("s1", "c-1"); err != nil {
		t.Fatal(err)
	}
	if err := charge("s2", "c-1"); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().CustomerOverlaps; n != 0 {
		t.Fatalf("sequential charges of one customer: %d overlaps, want 0", n)
	}
	errs := make(chan error, 3)
	for _, x := range [][2]string{{"p1", "c-2"}, {"p2", "c-2"}, {"p3", "c-3"}} {
		go func() { errs <- charge(x[0], x[1]) }()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Stats().CustomerOverlaps; n != 1 {
		t.Fatalf("two concurrent charges of c-2 and one of c-3: %d overlaps, want 1", n)
	}
}

// TestAuthorizeCapture: an authorization moves no money, its capture does,
// once; the same keys replay, a second capture under a new key is refused
// and counted, and a second authorization of the reference is counted.
func TestAuthorizeCapture(t *testing.T) {
	t.Parallel()
	s, c := start(t, psp.Config{})
	ctx := context.Background()
	auth, err := c.Authorize(ctx, "charge-pay_1", req)
	if err != nil || auth.Status != psp.StatusAuthorized || s.CapturedFor("pay_1") != 0 {
		t.Fatalf("authorize = %+v, %v, captured %d; want authorized, nothing captured", auth, err, s.CapturedFor("pay_1"))
	}
	if again, err := c.Authorize(ctx, "charge-pay_1", req); err != nil || again.ID != auth.ID {
		t.Fatalf("authorize again with the same key = %+v, %v; want the original %s", again, err, auth.ID)
	}
	// A one-step charge under an authorization's key is another request.
	var perr *psp.Error
	if _, err := c.Charge(ctx, "charge-pay_1", req); !errors.As(err, &perr) || perr.StatusCode != 422 {
		t.Fatalf("charge under an authorization's key = %v, want 422", err)
	}
	got, err := c.Capture(ctx, "charge-pay_1/capture", auth.ID)
	if err != nil || got.Status != psp.StatusSucceeded || got.ID != auth.ID || s.CapturedFor("pay_1") != 1 {
		t.Fatalf("capture = %+v, %v, captured %d", got, err, s.CapturedFor("pay_1"))
	}
	if again, err := c.Capture(ctx, "charge-pay_1/capture", auth.ID); err != nil || again.Status != psp.StatusSucceeded {
		t.Fatalf("capture again with the same key = %+v, %v", again, err)
	}
	if look, err := c.Lookup(ctx, "charge-pay_1"); err != nil || look.Status != psp.StatusSucceeded {
		t.Fatalf("lookup after capture = %+v, %v; want succeeded", look, err)
	}
	if st := s.Stats(); st.Authorizations != 1 || st.Captures != 1 || st.Charges != 1 || st.DoubleCaptures != 0 || st.DoubleAuthorizations != 0 {
		t.Fatalf("stats %+v: want one authorization, one capture", st)
	}
	if s.AuthorizeRequestsFor("pay_1") != 2 || s.CaptureRequestsFor("pay_1") != 2 {
		t.Fatalf("requests: %d authorize, %d capture; want 2 and 2", s.AuthorizeRequestsFor("pay_1"), s.CaptureRequestsFor("pay_1"))
	}
	// A capture under a new key: refused, not retryable, counted, nothing moved.
	if _, err := c.Capture(ctx, "other-capture", auth.ID); !errors.As(err, &perr) || perr.Code != "already_captured" || psp.IsRetryable(err) {
		t.Fatalf("second capture under a new key = %v, want a final already_captured", err)
	}
	if _, err := c.Authorize(ctx, "other-auth", req); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.DoubleCaptures != 1 || st.DoubleAuthorizations != 1 || s.CapturedFor("pay_1") != 1 {
		t.Fatalf("stats %+v, captured %d: want the double capture and authorization counted, one capture", st, s.CapturedFor("pay_1"))
	}
	// A declined authorization cannot be captured.
	s2, c2 := start(t, psp.Config{DeclineRate: 1})
	d, err := c2.Authorize(ctx, "k", req)
	if err != nil || d.Status != psp.StatusDeclined {
		t.Fatalf("declined authorization = %+v, %v", d, err)
	}
	if _, err := c2.Capture(ctx, "k/capture", d.ID); !errors.As(err, &perr) || perr.Code != "not_capturable" || s2.CapturedFor("pay_1") != 0 {
		t.Fatalf("capture of a decline = %v", err)
	}
}
