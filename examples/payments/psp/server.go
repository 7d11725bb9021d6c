package psp

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Config sets the simulator's behaviour. Rates are probabilities from 0 to 1;
// each decision is a pure function of Seed, the idempotency key (or
// reference) and how many requests that key has made, so a run with the same
// seed makes the same decisions whatever the timing.
type Config struct {
	// Seed makes the injected behaviour repeatable.
	Seed int64
	// MinLatency and MaxLatency bound the processing time of a charge, drawn
	// uniformly; default 0.
	MinLatency, MaxLatency time.Duration
	// DeclineRate is the share of payment references whose card is declined.
	// A declined reference stays declined.
	DeclineRate float64
	// ErrorRate is the share of requests failed with 503 before any
	// processing: nothing is charged.
	ErrorRate float64
	// LostResponseRate is the share of charge requests that are processed
	// (the money moves) but whose response never arrives: the connection is
	// closed instead.
	LostResponseRate float64
	// LostCaptureRate is the share of captures whose response is lost, on
	// top of LostResponseRate: the money moves, the caller never hears.
	LostCaptureRate float64
	// SlowRate is the share of charge requests delayed by SlowDelay before
	// processing, to outlast the client's timeout; the charge still happens.
	SlowRate float64
	// SlowDelay is the extra delay of slow requests; default 1 s.
	SlowDelay time.Duration
	// MerchantRateLimit, when positive, is the most requests per merchant
	// (the ChargeRequest.Merchant of the charge or authorization) in each
	// fixed window of MerchantRatePeriod, aligned to the Unix epoch as
	// Leasehold's KeyRateLimit windows are. Charges, authorizations,
	// captures and refunds count (lookups do not); requests over it get
	// 429, counted in Stats.RateLimited, and change nothing.
	MerchantRateLimit int
	// MerchantRatePeriod is the window of MerchantRateLimit; default 1 s.
	MerchantRatePeriod time.Duration
}

// rateWindow is one merchant's count in its current window.
type rateWindow struct {
	start int64 // window index: Unix nanoseconds / period
	count int
}

// Server is a running PSP simulator. Create it with Start.
type Server struct {
	cfg      Config
	listener net.Listener
	srv      *http.Server
	closed   chan struct{}
	closeMu  sync.Once

	mu       sync.Mutex
	byKey    map[string]*entry
	byID     map[string]*entry
	calls    map[string]int // requests seen per idempotency key
	captured map[string]int // successful charges per reference
	// authorized counts authorizations made per reference; captureKeys
	// maps a capture's idempotency key to the charge it captures.
	authorized  map[string]int
	captureKeys map[string]*capture
	// refundKeys maps a refund's idempotency key to the charge it refunds.
	refundKeys map[string]string
	// authorizeCalls and captureCalls count requests per reference.
	authorizeCalls, captureCalls map[string]int
	nextID                       int
	charges                      []*Charge // creation order
	requests                     atomic.Int64
	stats                        Stats
	inFlight                     map[string]int         // charge requests being answered per customer
	windows                      map[string]*rateWindow // per merchant
}

// entry is one idempotency key's record: the charge and the request that
// made it, a charge or an authorization.
type entry struct {
	charge        *Charge
	req           ChargeRequest
	authorization bool
	capturing     bool // a capture of the authorization is being processed
}

// capture is one capture idempotency key's record.
type capture struct {
	chargeID string
	done     bool // false while the capture is processed
}

// Start starts a simulator on a free loopback port.
func Start(cfg Config) (*Server, error) {
	if cfg.SlowDelay <= 0 {
		cfg.SlowDelay = time.Second
	}
	if cfg.MerchantRatePeriod <= 0 {
		cfg.MerchantRatePeriod = time.Second
	}
	if cfg.MaxLatency < cfg.MinLatency {
		cfg.MaxLatency = cfg.MinLatency
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("psp: listen on loopback: %w", err)
	}
	s := &Server{
		cfg: cfg, listener: ln, closed: make(chan struct{}),
		byKey: map[string]*entry{}, byID: map[string]*entry{}, calls: map[string]int{}, captured: map[string]int{},
		authorized: map[string]int{}, captureKeys: map[string]*capture{}, refundKeys: map[string]string{},
		authorizeCalls: map[string]int{}, captureCalls: map[string]int{},
		inFlight: map[string]int{}, windows: map[string]*rateWindow{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", s.handleCharge)
	mux.HandleFunc("POST /v1/authorizations", s.handleAuthorize)
	mux.HandleFunc("POST /v1/charges/{id}/capture", s.handleCapture)
	mux.HandleFunc("GET /v1/charges", s.handleLookup)
	mux.HandleFunc("POST /v1/charges/{id}/refund", s.handleRefund)
	s.srv = &http.Server{Handler: s.count(mux), ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // returns http.ErrServerClosed on Close
	return s, nil
}

// URL returns the simulator's base URL ("http://127.0.0.1:port").
func (s *Server) URL() string { return "http://" + s.listener.Addr().String() }

// Close stops the simulator at once; requests being delayed are dropped.
func (s *Server) Close() error {
	s.closeMu.Do(func() { close(s.closed) })
	return s.srv.Close()
}

// Stats returns the simulator's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Requests = s.requests.Load()
	for _, n := range s.captured {
		if n > 1 {
			st.DoubleCharges++
		}
	}
	for _, n := range s.authorized {
		if n > 1 {
			st.DoubleAuthorizations++
		}
	}
	return st
}

// Ledger returns a copy of every charge, in creation order.
func (s *Server) Ledger() []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Charge, len(s.charges))
	for i, c := range s.charges {
		out[i] = *c
	}
	return out
}

// CapturedFor returns how many successful charges the ledger holds for a
// payment reference: 0 or 1, unless the reference was charged twice.
func (s *Server) CapturedFor(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.captured[reference]
}

// AuthorizeRequestsFor and CaptureRequestsFor return how many
// authorization and capture requests the PSP received for a payment
// reference, replays with the same idempotency key included: a caller that
// never repeats a completed stage sends one of each, unless a response was
// lost or the PSP failed.
func (s *Server) AuthorizeRequestsFor(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authorizeCalls[reference]
}

// CaptureRequestsFor: see AuthorizeRequestsFor.
func (s *Server) CaptureRequestsFor(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.captureCalls[reference]
}

func (s *Server) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		next.ServeHTTP(w, r)
	})
}

// roll returns a number in [0, 1) that depends only on the seed and parts.
func (s *Server) roll(parts ...any) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(s.cfg.Seed))
	h.Write(b[:])
	for _, p := range parts {
		fmt.Fprint(h, "|", p)
	}
	// Mix the bits: FNV's low bits are weak for short inputs.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return float64(x>>11) / float64(1<<53)
}

// sleep waits d, or less when the server closes.
func (s *Server) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.closed:
	}
}

func (s *Server) latency(key string, n int) time.Duration {
	span := s.cfg.MaxLatency - s.cfg.MinLatency
	return s.cfg.MinLatency + time.Duration(math.Floor(s.roll("latency", key, n)*float64(span)))
}

func (s *Server) handleCharge(w http.ResponseWriter, r *http.Request) { s.create(w, r, false) }

// handleAuthorize authorizes a charge: the decline decision and every
// fault are the charge's, but a succeeded authorization moves no money
// until it is captured.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) { s.create(w, r, true) }

// create makes a charge (authorizeOnly false) or an authorization.
func (s *Server) create(w http.ResponseWriter, r *http.Request, authorizeOnly bool) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "missing_idempotency_key", "the Idempotency-Key header is required")
		return
	}
	var req ChargeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "body: "+err.Error())
		return
	}
	if req.Amount <= 0 || len(req.Currency) != 3 || req.Reference == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "amount must be positive, currency a 3-letter code, reference set")
		return
	}

	s.mu.Lock()
	if s.overRate(req.Merchant) {
		s.stats.RateLimited++
		s.mu.Unlock()
		writeError(w, http.StatusTooManyRequests, "rate_limited", "too many requests for merchant "+req.Merchant)
		return
	}
	if req.Customer != "" {
		// Counted while the request is answered or until the caller gives
		// up (its connection closes), whichever comes first.
		if s.inFlight[req.Customer]++; s.inFlight[req.Customer] > 1 {
			s.stats.CustomerOverlaps++
		}
		context.AfterFunc(r.Context(), func() {
			s.mu.Lock()
			s.inFlight[req.Customer]--
			s.mu.Unlock()
		})
	}
	if authorizeOnly {
		s.authorizeCalls[req.Reference]++
	}
	s.calls[key]++
	n := s.calls[key]
	if s.roll("error", key, n) < s.cfg.ErrorRate {
		s.stats.InjectedErrors++
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "unavailable", "injected error: try again")
		return
	}
	if e := s.byKey[key]; e != nil {
		switch {
		case e.req != req || e.authorization != authorizeOnly:
			s.mu.Unlock()
			writeError(w, http.StatusUnprocessableEntity, "idempotency_mismatch", "this idempotency key was used with different parameters")
		case e.charge.Status == StatusProcessing:
			s.mu.Unlock()
			writeError(w, http.StatusConflict, "in_progress", "a request with this idempotency key is being processed")
		default:
			s.stats.Replays++
			c := *e.charge
			s.mu.Unlock()
			s.sleep(s.latency(key, n))
			w.Header().Set("Idempotent-Replayed", "true")
			writeJSON(w, http.StatusOK, &c)
		}
		return
	}
	s.nextID++
	c := &Charge{
		ID: fmt.Sprintf("ch_%06d", s.nextID), IdempotencyKey: key, Reference: req.Reference,
		Amount: req.Amount, Currency: req.Currency, Status: StatusProcessing, CreatedAt: time.Now().UTC(),
	}
	e := &entry{charge: c, req: req, authorization: authorizeOnly}
	s.byKey[key], s.byID[c.ID] = e, e
	s.charges = append(s.charges, c)
	// Processing does not stop when the caller gives up: a real processor
	// finishes what it started.
	s.process(key, n)
	if s.roll("decline", req.Reference) < s.cfg.DeclineRate {
		c.Status, c.DeclineCode = StatusDeclined, "card_declined"
		s.stats.Declines++
	} else if authorizeOnly {
		c.Status = StatusAuthorized
		s.authorized[req.Reference]++
		s.stats.Authorizations++
	} else {
		c.Status = StatusSucceeded
		s.captured[req.Reference]++
		s.stats.Charges++
	}
	out := *c
	lost := s.roll("lost", key, n) < s.cfg.LostResponseRate
	if lost {
		s.stats.LostResponses++
	}
	s.mu.Unlock()

	if lost {
		dropConnection(w)
		return
	}
	writeJSON(w, http.StatusCreated, &out)
}

// overRate counts a request of merchant in its current window and reports
// whether the window was already full. Called with s.mu held.
func (s *Server) overRate(merchant string) bool {
	if s.cfg.MerchantRateLimit <= 0 || merchant == "" {
		return false
	}
	idx := time.Now().UnixNano() / int64(s.cfg.MerchantRatePeriod)
	win := s.windows[merchant]
	if win == nil || win.start != idx {
		win = &rateWindow{start: idx}
		s.windows[merchant] = win
	}
	if win.count >= s.cfg.MerchantRateLimit {
		return true
	}
	win.count++
	return false
}

// dropConnection closes the connection without a response, as a network
// failure after the charge would.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeError(w, http.StatusBadGateway, "connection_lost", "response lost")
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	conn.Close()
}

// process takes the time a call of key (its n-th) takes at the
// processor, sometimes slow: called and returning with s.mu held, it
// releases it meanwhile.
func (s *Server) process(key string, n int) {
	slow := s.roll("slow", key, n) < s.cfg.SlowRate
	if slow {
		s.stats.SlowResponses++
	}
	s.mu.Unlock()
	delay := s.latency(key, n)
	if slow {
		delay += s.cfg.SlowDelay
	}
	s.sleep(delay)
	s.mu.Lock()
}

// chargeCall starts a call on the charge named by the path: it needs an
// idempotency key, a known charge and room in the charge's merchant rate
// window. It returns with s.mu held, or, having answered the error, with
// ok false and s.mu free.
func (s *Server) chargeCall(w http.ResponseWriter, r *http.Request) (key string, e *entry, ok bool) {
	key = r.Header.Get("Idempotency-Key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "missing_idempotency_key", "the Idempotency-Key header is required")
		return "", nil, false
	}
	id := r.PathValue("id")
	s.mu.Lock()
	e = s.byID[id]
	if e == nil {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "not_found", "no charge "+id)
		return "", nil, false
	}
	if s.overRate(e.req.Merchant) {
		s.stats.RateLimited++
		s.mu.Unlock()
		writeError(w, http.StatusTooManyRequests, "rate_limited", "too many requests for merchant "+e.req.Merchant)
		return "", nil, false
	}
	return key, e, true
}

// handleCapture captures an authorized charge under its own idempotency
// key: the money moves, once. The same key answers with the original
// capture; another key for a charge captured or being captured is refused
// with 409 and counted (Stats.DoubleCaptures): money never moves twice,
// but the caller lost track of a capture it had made.
func (s *Server) handleCapture(w http.ResponseWriter, r *http.Request) {
	key, e, ok := s.chargeCall(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	c := e.charge
	s.captureCalls[c.Reference]++
	s.calls[key]++
	n := s.calls[key]
	if s.roll("error", key, n) < s.cfg.ErrorRate {
		s.stats.InjectedErrors++
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "unavailable", "injected error: try again")
		return
	}
	if cp := s.captureKeys[key]; cp != nil {
		switch {
		case cp.chargeID != id:
			s.mu.Unlock()
			writeError(w, http.StatusUnprocessableEntity, "idempotency_mismatch", "this idempotency key captured another charge")
		case !cp.done:
			s.mu.Unlock()
			writeError(w, http.StatusConflict, "in_progress", "a capture with this idempotency key is being processed")
		default:
			s.stats.Replays++
			out := *c
			s.mu.Unlock()
			s.sleep(s.latency(key, n))
			w.Header().Set("Idempotent-Replayed", "true")
			writeJSON(w, http.StatusOK, &out)
		}
		return
	}
	switch {
	case c.Status == StatusSucceeded || e.capturing:
		s.stats.DoubleCaptures++
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "already_captured", "charge "+id+" is captured already")
		return
	case c.Status != StatusAuthorized:
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "not_capturable", "charge "+id+" is "+string(c.Status))
		return
	}
	cp := &capture{chargeID: id}
	s.captureKeys[key] = cp
	e.capturing = true
	s.process(key, n)
	c.Status = StatusSucceeded
	e.capturing, cp.done = false, true
	s.captured[c.Reference]++
	s.stats.Charges++
	s.stats.Captures++
	out := *c
	lost := s.roll("lost", key, n) < s.cfg.LostResponseRate || s.roll("lost-capture", key, n) < s.cfg.LostCaptureRate
	if lost {
		s.stats.LostResponses++
	}
	s.mu.Unlock()
	if lost {
		dropConnection(w)
		return
	}
	writeJSON(w, http.StatusCreated, &out)
}

func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("idempotency_key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "the idempotency_key parameter is required")
		return
	}
	s.mu.Lock()
	s.calls["lookup:"+key]++
	n := s.calls["lookup:"+key]
	if s.roll("error", "lookup:"+key, n) < s.cfg.ErrorRate {
		s.stats.InjectedErrors++
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "unavailable", "injected error: try again")
		return
	}
	e := s.byKey[key]
	var c Charge
	if e != nil {
		c = *e.charge
	}
	s.mu.Unlock()
	if e == nil {
		writeError(w, http.StatusNotFound, "not_found", "no charge with this idempotency key")
		return
	}
	writeJSON(w, http.StatusOK, &c)
}

// handleRefund refunds a captured charge under its own idempotency key.
// The same key answers with the original refund; another key for a charge
// refunded already is refused with 409 "already_refunded" and counted
// (Stats.DoubleRefunds); a refund of a charge not captured (authorized,
// being captured, declined) is refused with 409 "not_refundable" and
// counted (Stats.RefundsBeforeCapture). Both refusals are final.
func (s *Server) handleRefund(w http.ResponseWriter, r *http.Request) {
	key, e, ok := s.chargeCall(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	c := e.charge
	s.calls[key]++
	n := s.calls[key]
	if s.roll("error", key, n) < s.cfg.ErrorRate {
		s.stats.InjectedErrors++
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "unavailable", "injected error: try again")
		return
	}
	if refunded, ok := s.refundKeys[key]; ok {
		if refunded != id {
			s.mu.Unlock()
			writeError(w, http.StatusUnprocessableEntity, "idempotency_mismatch", "this idempotency key refunded another charge")
			return
		}
		s.stats.Replays++
		out := *c
		s.mu.Unlock()
		s.sleep(s.latency(key, n))
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusOK, &out)
		return
	}
	switch {
	case c.Status != StatusSucceeded || e.capturing:
		s.stats.RefundsBeforeCapture++
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "not_refundable", "charge "+id+" is "+string(c.Status)+", not captured")
		return
	case c.Refunded:
		s.stats.DoubleRefunds++
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "already_refunded", "charge "+id+" is refunded already")
		return
	}
	s.refundKeys[key] = id
	c.Refunded = true
	s.stats.Refunds++
	out := *c
	lost := s.roll("lost", key, n) < s.cfg.LostResponseRate
	if lost {
		s.stats.LostResponses++
	}
	s.mu.Unlock()
	s.sleep(s.latency(key, n))
	if lost {
		dropConnection(w)
		return
	}
	writeJSON(w, http.StatusCreated, &out)
}

// apiError is the body of an error response.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var body apiError
	body.Error.Code, body.Error.Message = code, msg
	writeJSON(w, status, &body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An error means the caller went away; there is no one left to tell.
	_ = json.NewEncoder(w).Encode(v)
}
