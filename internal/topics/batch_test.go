package topics

import (
	"testing"

	"reckon/internal/kafkaconn"
)

// TestEveryTopicTakesAFullProducerBatch: reckon's producers batch up to
// kafkaconn.MaxRecordBytes per partition (the stream worker uncompressed),
// and a broker rejects a whole batch over a topic's max.message.bytes with
// MESSAGE_TOO_LARGE. A topic left at the broker default (1 MiB) loses a
// burst of panes or features, or an operator snapshot over 1 MiB (found by
// streaming's TestBadInputThroughStream with 50,000 keys).
func TestEveryTopicTakesAFullProducerBatch(t *testing.T) {
	m, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range m.Topics {
		if tp.MaxMessageBytes < kafkaconn.MaxRecordBytes {
			t.Errorf("%s: max_message_bytes %d, producers batch up to %d", tp.Name, tp.MaxMessageBytes, kafkaconn.MaxRecordBytes)
		}
	}
}
