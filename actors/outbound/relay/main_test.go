package relay_test

import (
	"os"
	"testing"

	"paysvc/topics/kafkatest"
)

// The relay's tests run on the real Apache Kafka cluster whenever `make test`
// gives one (PAYSVC_TEST_KAFKA_BROKERS): what they show (every event once, in
// order, batches within the broker's limit) must hold on the production broker,
// acks=all on three replicas. Those that inject faults only kfake can stay on
// kfake (newFakeKafka, each says why).
func TestMain(m *testing.M) {
	kafkatest.PreferReal()
	os.Exit(m.Run())
}
