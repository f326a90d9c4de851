package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/inproc"
	"paysvc/topics/tracing"
)

// setUp is what every role shares: tracing, the database and its migrations, the
// brokers (an embedded Kafka when none is configured), the command producer and
// the topics, which exist before any role produces or consumes.
func (st *starter) setUp(ctx context.Context) (err error) {
	s, cfg, log := st.Service, st.cfg, st.Log
	if s.stopTracing, err = tracing.Start(ctx, cfg.Tracing, cfg.InstanceID); err != nil {
		return err
	}
	mainConns, _ := cfg.DBPools()
	if s.DB, err = storage.OpenPool(ctx, cfg.DatabaseURL, 30*time.Second, storage.Pool{MaxConns: mainConns, Log: log}); err != nil {
		return err
	}
	if applied, err := storage.Migrate(ctx, s.DB); err != nil {
		return err
	} else if len(applied) > 0 {
		log.Info("migrations applied", "versions", applied)
	}
	s.Brokers = cfg.KafkaBrokers
	if len(s.Brokers) == 0 {
		// The options of `paysvc broker` (broker.go), plus the in-memory path for
		// this process's own clients.
		opts := append(brokerOpts(cfg), kfake.ListenFn(inproc.Listen))
		if s.cluster, err = kfake.NewCluster(opts...); err != nil {
			return fmt.Errorf("embedded kafka on port %d: %w", cfg.KafkaPort, err)
		}
		s.Brokers = s.cluster.ListenAddrs()
		log.Info("embedded kafka started", "brokers", s.Brokers, "data_dir", cfg.KafkaDir())
		if cfg.Environment == "live" { // only with PAYSVC_ALLOW_EMBEDDED_KAFKA (Validate)
			log.Warn("live server on the embedded Kafka broker (PAYSVC_ALLOW_EMBEDDED_KAFKA=true): the command log is on this machine's disk only")
		}
	}
	s.producer, err = kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.Dialer(inproc.Dial), inproc.Compression(s.Brokers), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(topics.MaxRecordBytes),
		kgo.ClientID("paysvc-"+cfg.InstanceID), kgo.ProduceRequestTimeout(5*time.Second))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	// Creating a dozen replicated topics waits for the controller; on a busy
	// cluster that took more than 30 s in the tests.
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	findings, err := topics.Provision(tctx, s.producer, topics.Settings{Namespace: cfg.KafkaNamespace, CommandPartitions: cfg.CommandPartitions,
		CommandRetention: cfg.CommandRetention, EventRetention: cfg.EventRetention})
	if err != nil {
		return err
	}
	reportTopicFindings(findings, log)
	return nil
}

// topicFindings are the topic settings weaker than paysvc asks that it could not
// set itself (replication factor, command partitions): each needs an operator.
var topicFindings = promauto.NewGaugeVec(prometheus.GaugeOpts{
	Name: "paysvc_kafka_topic_findings",
	Help: "1 for each topic setting weaker than paysvc asks that only an operator can change (replication factor, command partitions), as found at start.",
}, []string{"topic", "setting"})

// reportTopicFindings logs what Provision found on existing topics: a warning for
// each config it set, an error for each it could not.
func reportTopicFindings(findings []topics.Finding, log *slog.Logger) {
	for _, f := range findings {
		if f.Fixed {
			log.Warn("kafka topic config was weaker than paysvc asks; set it", "topic", f.Topic, "setting", f.Setting, "was", f.Have, "now", f.Want)
			continue
		}
		topicFindings.WithLabelValues(f.Topic, f.Setting).Set(1)
		log.Error("kafka topic weaker than paysvc asks", "topic", f.Topic, "setting", f.Setting, "have", f.Have, "want", f.Want, "what_to_do", f.Detail)
	}
}
