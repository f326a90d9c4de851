package dispatch_test

import (
	"os"
	"testing"

	"paysvc/topics/kafkatest"
)

// The dispatcher's tests run on the real Apache Kafka cluster whenever `make
// test` gives one (PAYSVC_TEST_KAFKA_BROKERS): its consumer group, offset
// commits and rebalances are what must hold on the production broker's group
// coordinator, not only on the embedded one's.
func TestMain(m *testing.M) {
	kafkatest.PreferReal()
	os.Exit(m.Run())
}
