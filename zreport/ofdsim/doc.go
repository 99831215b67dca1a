// Package ofdsim is a simulated fiscal data operator (ОФД): the HTTP API the
// Z-report workflows ask for a missing OFD document on day six. `reckon dev`
// runs it in the batch stack and `reckon zreport ofd-sim` standalone; tests
// run it on httptest.
//
// # Contract
//
//	GET  /v1/zreports/{fiscal_drive}/{shift}
//	     200 {"event_id":"…","fiscal_drive":"…","shift":N,"receipts":N,"total":X,"shift_closed_at":"RFC 3339"}
//	     404 {"error":"not_found"}      the operator has no document (yet): a business answer, not a failure
//	     400 {"error":"bad_request"}    fiscal_drive is not 16 digits or shift not a positive integer
//	     503 {"error":"unavailable"}    a simulated failure (Options.FailFirst, Options.FailureFraction)
//	PUT  /v1/zreports/{fiscal_drive}/{shift}   body: a document; registers it (204)
//	GET  /healthz                      200 ok
//
// event_id is the document's id: when the same document also reaches the
// parts topic as zreport.ofd.received with that event_id, the workflow sees
// a duplicate, not a correction. Figures use the parts topic's field names.
//
// # Where documents come from
//
// Options.Documents answers lookups; documents PUT over HTTP are consulted
// first. Store holds documents in memory and loads them from JSONL (part
// envelopes, e.g. the output of `reckon generate --out`, or bare documents);
// the reckon wiring chains a Store with the fiscal generator's own
// OFDDocument, so the simulator answers what the operator of a generator
// run with the same seed and key count would — including for the keys
// whose OFD part the generator withheld. The same (seed, keys) always give
// the same figures; event_id is then derived from the key
// ("ofd-<fiscal_drive>-<shift>"), since the generator's ids are random.
//
// Missing documents (Options.MissingFraction) and failures
// (Options.FailureFraction) are chosen by a hash of the key (and of the
// request's number for that key), so a run is reproducible.
//
// It is not a model of a real operator's API (authentication, paging,
// document formats of ФФД are out of scope).
package ofdsim
