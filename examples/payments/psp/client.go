package psp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// ErrNotFound is returned by Lookup when the PSP has no charge with the key:
// no request with it ever reached the PSP.
var ErrNotFound = errors.New("psp: no charge with this idempotency key")

// Error is an error response from the PSP.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the PSP's error code ("unavailable", "in_progress").
	Code string
	// Message explains it.
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("psp: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// Retryable reports whether the same request may succeed later: server
// errors, rate limits and a request with the same key still in progress
// (not a capture refused as already captured or not capturable, nor a
// refund refused as already refunded or not refundable).
func (e *Error) Retryable() bool {
	if e.StatusCode == http.StatusConflict {
		// A capture refused because the charge is captured already, or
		// cannot be, stays refused.
		return e.Code != "already_captured" && e.Code != "not_capturable" &&
			e.Code != "already_refunded" && e.Code != "not_refundable"
	}
	return e.StatusCode >= 500 || e.StatusCode == http.StatusTooManyRequests
}

// IsRetryable reports whether err from a Client call is transient: a
// retryable *Error, or a transport failure (timeout, connection lost) after
// which the outcome is unknown and the request must be repeated with the same
// idempotency key.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Retryable()
	}
	return !errors.Is(err, ErrNotFound)
}

// Client calls a PSP simulator.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client for the PSP at baseURL whose requests time out
// after timeout (zero: 10 s). It never uses a proxy: the simulator is on
// loopback.
func NewClient(baseURL string, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{base: baseURL, http: &http.Client{Transport: tr, Timeout: timeout}}
}

// CloseIdleConnections closes the client's idle connections.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Charge asks the PSP to charge req under the idempotency key. The returned
// charge is succeeded or declined (a decline is not an error). An error
// leaves the outcome unknown when IsRetryable: repeat with the same key, or
// Lookup the key.
func (c *Client) Charge(ctx context.Context, key string, req ChargeRequest) (*Charge, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("psp: encode charge: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("psp: build charge request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Idempotency-Key", key)
	// net/http resends a request with an Idempotency-Key by itself when a
	// reused connection drops; that would hide lost responses from the
	// caller, whose retry policy should decide. Without GetBody it cannot.
	hreq.GetBody = nil
	var ch Charge
	if err := c.do(hreq, &ch); err != nil {
		return nil, fmt.Errorf("charge %s: %w", key, err)
	}
	return &ch, nil
}

// Authorize asks the PSP to authorize req under the idempotency key: the
// returned charge is authorized (held, no money moved yet) or declined (not
// an error). Errors are as Charge's: when IsRetryable, repeat with the same
// key, or Lookup it. Capture moves the money.
func (c *Client) Authorize(ctx context.Context, key string, req ChargeRequest) (*Charge, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("psp: encode authorization: %w", err)
	}
	var ch Charge
	if err := c.post(ctx, "/v1/authorizations", key, body, &ch); err != nil {
		return nil, fmt.Errorf("authorize %s: %w", key, err)
	}
	return &ch, nil
}

// Capture captures the authorized charge chargeID under its own
// idempotency key and returns it succeeded. The same key answers with the
// original capture; capturing under another key a charge already captured
// fails with a 409 *Error (Code "already_captured"), and nothing moves.
func (c *Client) Capture(ctx context.Context, key, chargeID string) (*Charge, error) {
	var ch Charge
	// A body, though the PSP reads none: net/http would resend a bodiless
	// request with an Idempotency-Key by itself after a lost response.
	if err := c.post(ctx, "/v1/charges/"+url.PathEscape(chargeID)+"/capture", key, []byte("{}"), &ch); err != nil {
		return nil, fmt.Errorf("capture %s: %w", key, err)
	}
	return &ch, nil
}

// post sends a POST with an idempotency key and decodes the answer.
func (c *Client) post(ctx context.Context, path, key string, body []byte, out any) error {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("psp: build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Idempotency-Key", key)
	// As in Charge: no transparent resend by net/http.
	hreq.GetBody = nil
	return c.do(hreq, out)
}

// Lookup returns the charge made under the idempotency key, or ErrNotFound
// when the PSP never received a request with it.
func (c *Client) Lookup(ctx context.Context, key string) (*Charge, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/charges?idempotency_key="+url.QueryEscape(key), nil)
	if err != nil {
		return nil, fmt.Errorf("psp: build lookup request: %w", err)
	}
	var ch Charge
	if err := c.do(hreq, &ch); err != nil {
		var e *Error
		if errors.As(err, &e) && e.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("look up %s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("look up %s: %w", key, err)
	}
	return &ch, nil
}

// Refund refunds the captured charge chargeID under its own idempotency
// key. The same key answers with the original refund; refunding under
// another key a charge refunded already fails with a 409 *Error (Code
// "already_refunded"), and a charge not captured with Code "not_refundable":
// both final.
func (c *Client) Refund(ctx context.Context, key, chargeID string) (*Charge, error) {
	var ch Charge
	// A body, as in Capture: no transparent resend by net/http.
	if err := c.post(ctx, "/v1/charges/"+url.PathEscape(chargeID)+"/refund", key, []byte("{}"), &ch); err != nil {
		return nil, fmt.Errorf("refund %s: %w", key, err)
	}
	return &ch, nil
}

func (c *Client) do(req *http.Request, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("psp: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("psp: read response: %w", err)
	}
	if resp.StatusCode >= 300 {
		var body apiError
		_ = json.Unmarshal(data, &body)
		return &Error{StatusCode: resp.StatusCode, Code: body.Error.Code, Message: body.Error.Message}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("psp: decode response: %w", err)
	}
	return nil
}
