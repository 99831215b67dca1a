// Package generate synthesises reckon's traffic: temperature readings
// (docs/requirements.md R-GATE-5), checkout payments (R-ROLL, R-WIN) and
// fiscal Z-report parts from OFD, DWH and RMS (R-Z-2), with the faults real
// sources have — late
// and very late deliveries, redeliveries, clock skew, corrected resends,
// missing parts and poison records of every kind the quality gate rejects.
//
// # Determinism
//
// Generation is pure: the same Options (seed included) give byte-identical
// records in the same order, on every machine and Go release (floats,
// exponentials and normals are derived here from math/rand/v2's PCG, whose
// algorithm is fixed). No clock is read. Values are chosen so truth sums are
// exact in float64 whatever order a consumer adds them in: temperatures are
// multiples of 1/16 °C (a DS18B20's resolution), IDR amounts multiples of
// 500; fiscal totals have kopeks and compare within 0.005.
//
// Reruns into the same topics must not repeat event_ids, or dedup takes the
// new events for redeliveries: Options.IDNonce changes every event_id and
// nothing else, and Options.FirstKey moves fiscal traffic to shifts an
// earlier run did not make. `reckon generate` picks a random nonce unless
// --seed is given.
//
// # Time
//
// Event times start at Options.Start and advance by exponential gaps of mean
// 1/Rate. Every record has a simulated arrival = event time + a delivery
// delay (on time: ~out-of-orderness/20; late: after its window fired; fiscal:
// shift close + the source's delay, OFD days later). The arrival is the Kafka
// record timestamp (the stream worker's arrival, used by the gate's skew
// check) and the JSONL arrived_at, so content never depends on the wall
// clock. Generator.Next yields records in arrival order (ties in generation
// order): records within a partition reach Kafka in that order.
// Generator.Run can pace the output with a Clock: a record leaves when the
// clock is as far past RunOptions.Epoch as its arrival is past Start — with
// Start = Epoch = now, live traffic whose timestamps track the wall clock.
//
// # Outputs
//
// Kafka (KafkaSink, ProducerOpts): key = id_perangkat, user_id or
// fiscal_drive/shift; value = the envelope's exact bytes, poison included
// (bad JSON and NaN literals are not JSON). JSONL (JSONLSink): one line per
// record that is a JSON object, the envelope with a top-level arrived_at
// added — the input of `reckon simulate`, `reckon validate` and `reckon lake
// write`; bad_json and nan poison exist on Kafka only (Record.JSON false) and
// the manifest says so per record. Oversized poison makes ~1 MiB lines.
//
// # Manifest
//
// Recorder folds a finite run into a Manifest (JSON): options, counts per
// category (summing to the records produced), poison per kind with the field
// event.Gate names, every record that is not on_time listed with its seq,
// event_id, key, times and (when produced) partition/offset, the truth per
// (stream, key, window_start) as count/sum/min/max (event.Agg) over valid
// unique events, and for fiscal the expected final figures and status of
// every business key (also with the OFD operator's document when the OFD
// part never came; see Generator.OFDDocument).
//
// # Continuous mode
//
// With Count 0 the generator runs forever in bounded memory: about Rate ×
// the longest delay of held records plus a fixed ring of redelivery
// candidates; no manifest. Live gives delays fit for a dev stack.
//
// It is not a load tester of the broker and decides nothing the stream or
// batch layers decide: late and beyond-lateness are the generator's intent
// (see Category), exact only when traffic is dense enough that the
// watermark follows arrivals.
package generate
