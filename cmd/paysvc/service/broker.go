package service

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"paysvc/topics"
)

// brokerOpts are the embedded Kafka's options, the same whether it runs inside
// `paysvc serve` (no PAYSVC_KAFKA_BROKERS) or alone as `paysvc broker`: what the
// cluster test kills and restarts is the broker a developer's `make run` uses.
//
// Persistence (kfake's DataDir, read from its source at the version in go.mod):
// every produced batch is written to its partition's segment file with one
// write(2) before the produce is answered, committed group offsets are appended
// to groups.log the same way, and topics.json is rewritten (temp file, rename) on
// every topic change. So an acknowledged record survives a SIGKILL of the broker
// process (the kernel holds the written pages); it survives a crash of the
// machine only with SyncWrites (PAYSVC_KAFKA_SYNC_WRITES=true), which fsyncs each
// batch. On a clean stop kfake also writes snapshots and its group members
// (session.json); after a SIGKILL it replays the segments instead and the
// consumers join their groups again.
func brokerOpts(cfg Config) []kfake.Opt {
	opts := []kfake.Opt{
		kfake.Ports(cfg.KafkaPort), kfake.DataDir(cfg.KafkaDir()),
		kfake.SeedTopics(cfg.CommandPartitions, cfg.KafkaNamespace.Topic(topics.CommandsTopic)),
		kfake.GroupMinSessionTimeout(time.Second), kfake.AllowAutoTopicCreation(),
	}
	if cfg.KafkaSyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	return opts
}

// StartBroker runs the embedded Kafka broker on its own, for `paysvc broker`
// (development and the cluster test only; compose runs Apache Kafka). It listens on
// 127.0.0.1:cfg.KafkaPort and keeps its log in cfg.KafkaDir(). A live
// configuration is refused unless PAYSVC_ALLOW_EMBEDDED_KAFKA says otherwise, as
// for `serve`.
func StartBroker(cfg Config, log *slog.Logger) (*kfake.Cluster, error) {
	if cfg.Environment == "live" && !cfg.AllowEmbeddedKafka {
		return nil, fmt.Errorf("paysvc broker is the development broker; a live deployment needs a Kafka cluster " +
			"(set PAYSVC_ALLOW_EMBEDDED_KAFKA=true to run it all the same)")
	}
	c, err := kfake.NewCluster(brokerOpts(cfg)...)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka on port %d: %w", cfg.KafkaPort, err)
	}
	log.Info("embedded kafka broker started", "brokers", c.ListenAddrs(), "data_dir", cfg.KafkaDir(),
		"sync_writes", cfg.KafkaSyncWrites, "command_partitions", cfg.CommandPartitions)
	return c, nil
}
