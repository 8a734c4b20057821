package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/seamlm/seam/scheduler"
)

// metrics are the server's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg              *prometheus.Registry
	requests         *prometheus.CounterVec
	promptTokens     prometheus.Counter
	completionTokens prometheus.Counter
	ttft, itl        prometheus.Histogram
	active, queued   prometheus.Gauge
	rejected         prometheus.Counter
	sampled          atomic.Uint64 // tokens sampled so far, counted as they come (the page's live tok/s)
}

// latency buckets from 1 ms to about 33 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 16)

func newMetrics(engine scheduler.Engine) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seam_api_requests_total",
			Help: "Completion requests by endpoint (chat, completions) and HTTP status (499: the client went away; for streams, the status of the error event)."}, []string{"endpoint", "status"}),
		promptTokens:     prometheus.NewCounter(prometheus.CounterOpts{Name: "seam_api_prompt_tokens_total", Help: "Prompt tokens of admitted requests."}),
		completionTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "seam_api_completion_tokens_total", Help: "Tokens generated."}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seam_api_time_to_first_token_seconds",
			Help: "Time from the start of the prefill to the first generated token.", Buckets: latencyBuckets}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seam_api_inter_token_latency_seconds",
			Help: "Time between consecutive generated tokens of a request.", Buckets: latencyBuckets}),
		active:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "seam_api_requests_active", Help: "Requests generating now (at most --max-concurrent)."}),
		queued:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "seam_api_requests_queued", Help: "Requests waiting for a slot (at most --queue)."}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "seam_api_requests_rejected_total", Help: "Requests refused with 429: every slot and the queue were full."}),
	}
	m.reg.MustRegister(m.requests, m.promptTokens, m.completionTokens, m.ttft, m.itl, m.active, m.queued, m.rejected,
		topologyCollector{engine}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) completed(n int) { m.completionTokens.Add(float64(n)) }

func (m *metrics) request(endpoint string, status int) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
}

// FirstToken implements scheduler.Observer.
func (m *metrics) FirstToken(d time.Duration) {
	m.ttft.Observe(d.Seconds())
	m.sampled.Add(1)
}

// NextToken implements scheduler.Observer.
func (m *metrics) NextToken(d time.Duration) {
	m.itl.Observe(d.Seconds())
	m.sampled.Add(1)
}

// topologyCollector reads the engine's view of its stages at scrape time.
type topologyCollector struct{ engine scheduler.Engine }

var (
	stageLabels      = []string{"stage", "addr"}
	descUp           = prometheus.NewDesc("seam_stage_up", "1 when the stage answered the head's last ping.", stageLabels, nil)
	descRTT          = prometheus.NewDesc("seam_stage_round_trip_seconds", "Round trip of the head's last ping to the stage.", stageLabels, nil)
	descCompute      = prometheus.NewDesc("seam_stage_compute_seconds_total", "Time the stage spent computing (embedding, layers, logits), as it reports.", stageLabels, nil)
	descPositions    = prometheus.NewDesc("seam_stage_positions_total", "Token positions the stage computed, as it reports.", stageLabels, nil)
	descPerToken     = prometheus.NewDesc("seam_stage_compute_seconds_per_token", "The stage's compute time per position over the last poll with work.", stageLabels, nil)
	descSessions     = prometheus.NewDesc("seam_stage_sessions", "Sessions (KV caches) the stage holds now.", stageLabels, nil)
	descKV           = prometheus.NewDesc("seam_stage_kv_cache_bytes", "Bytes of KV cache the stage holds now.", stageLabels, nil)
	boundaryLabels   = []string{"boundary", "encoding"}
	descWireBytes    = prometheus.NewDesc("seam_wire_bytes_total", "Bytes sent across each boundary of the chain, frame headers included.", boundaryLabels, nil)
	descWirePerToken = prometheus.NewDesc("seam_wire_bytes_per_token", "Bytes sent across the boundary per position over the last poll with work.", boundaryLabels, nil)
	descWireRate     = prometheus.NewDesc("seam_wire_bytes_per_second", "Bytes per second across the boundary over the last poll.", boundaryLabels, nil)
	descRefusals     = prometheus.NewDesc("seam_stage_refusals_total", "What the stage refused or cut off, by limit (stages of protocol generation 4 on).", append(stageLabels, "limit"), nil)
	descFailovers    = prometheus.NewDesc("seam_pipeline_failovers_total", "Sessions moved to a replica stage and replayed after a stage failed.", nil, nil)
)

func (topologyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descRTT, descCompute, descPositions, descPerToken, descSessions, descKV, descWireBytes, descWirePerToken, descWireRate, descFailovers, descRefusals} {
		ch <- d
	}
}

func (c topologyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	c.engine.Refresh(ctx) // a scrape shows what the stages hold now
	cancel()
	t := c.engine.Topology()
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(descFailovers, counter, float64(t.Failovers))
	for _, s := range t.Stages {
		l := []string{strconv.Itoa(s.Index + 1), s.Addr}
		up := 0.0
		if s.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descUp, gauge, up, l...)
		ch <- prometheus.MustNewConstMetric(descRTT, gauge, s.RTT.Seconds(), l...)
		ch <- prometheus.MustNewConstMetric(descCompute, counter, s.ComputeSeconds, l...)
		ch <- prometheus.MustNewConstMetric(descPositions, counter, float64(s.Positions), l...)
		ch <- prometheus.MustNewConstMetric(descPerToken, gauge, s.ComputePerToken.Seconds(), l...)
		ch <- prometheus.MustNewConstMetric(descSessions, gauge, float64(s.Sessions), l...)
		ch <- prometheus.MustNewConstMetric(descKV, gauge, float64(s.KVBytes), l...)
		r := s.Refusals
		for _, c := range []struct {
			limit string
			n     uint64
		}{{"max_conns", r.Conns}, {"pre_handshake", r.PreHandshake}, {"handshake", r.Handshakes}, {"trickled", r.Trickled},
			{"max_sessions", r.Sessions}, {"max_sessions_per_conn", r.SessionsPerConn}, {"max_sessions_per_identity", r.SessionsPerIdentity},
			{"max_prefill", r.Prefill}, {"max_inflight_tokens", r.InFlight}, {"max_queue", r.QueueFull}, {"idle", r.Idle},
			{"routes", r.Routes}, {"cancelled", r.Cancelled}, {"kv_budget", r.KV}} {
			ch <- prometheus.MustNewConstMetric(descRefusals, counter, float64(c.n), append(l, c.limit)...)
		}
	}
	for _, b := range t.Boundaries {
		l := []string{fmt.Sprintf("%s -> %s", b.From, b.To), b.Encoding}
		ch <- prometheus.MustNewConstMetric(descWireBytes, counter, float64(b.Bytes), l...)
		ch <- prometheus.MustNewConstMetric(descWirePerToken, gauge, b.BytesPerToken, l...)
		ch <- prometheus.MustNewConstMetric(descWireRate, gauge, b.BytesPerSecond, l...)
	}
}
