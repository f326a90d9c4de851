package service_test

import (
	"os"
	"testing"

	"paysvc/topics/kafkatest"
)

// The whole-service tests run on the real Apache Kafka cluster whenever `make
// test` gives one (PAYSVC_TEST_KAFKA_BROKERS): they are what must hold on the
// production broker, not only on the embedded one (topics/kafkatest).
func TestMain(m *testing.M) {
	kafkatest.PreferReal()
	os.Exit(m.Run())
}
