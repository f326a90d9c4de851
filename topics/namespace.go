package topics

import (
	"fmt"
	"slices"
	"strings"
)

// Namespace is the prefix of a deployment's topics and consumer groups on a
// shared Kafka cluster (PAYSVC_KAFKA_NAMESPACE), so that several deployments
// (staging beside a test environment, or many test services at once) use one
// cluster without reading each other's commands: with namespace "staging." the
// command log is staging.paysvc.commands.v1 and the engines' group
// staging.paysvc-engine. The empty namespace is the names of this package as
// they are (the wire contract of a deployment that has its cluster to itself).
//
// The namespace is applied only at the Kafka boundary: the topic of a record
// produced, the topics a client consumes, lists, creates or describes, the
// topic keys of offsets handed to the client, and group ids. Everywhere else
// (the process, PostgreSQL, the outbox, partition_offsets, metrics labels)
// topics keep their logical names, the constants of this package, and a
// consumed record's topic is made logical again (Logical) before anything else
// looks at it. It is a value, threaded to every Kafka client: services of
// different namespaces may run in one process (the tests do).
type Namespace string

// Topic is the name on the cluster of a logical topic.
func (n Namespace) Topic(logical string) string { return string(n) + logical }

// Topics is Topic of each name.
func (n Namespace) Topics(logical ...string) []string {
	out := make([]string, len(logical))
	for i, t := range logical {
		out[i] = n.Topic(t)
	}
	return out
}

// Logical is the logical name of a topic on the cluster: physical without the
// prefix. A name without it is returned unchanged (a client of the namespace
// reads only its own topics, so that is not one of them).
func (n Namespace) Logical(physical string) string { return strings.TrimPrefix(physical, string(n)) }

// Group is the id on the cluster of a consumer group.
func (n Namespace) Group(group string) string { return string(n) + group }

// MaxTopicLen is the longest topic name Kafka accepts.
const MaxTopicLen = 249

// AllTopics are the logical names of every topic a deployment uses (the ones
// EnsureTopics creates), sorted.
func AllTopics() []string {
	out := []string{CommandsTopic, RepliesTopic, RailsMpesaSTKTopic, RailsCardTopic, RailsPesalinkTopic, RailsPayoutTopic, CallbackTopic}
	for _, t := range EventTopics {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Validate says why a namespace cannot prefix the deployment's names: Kafka
// accepts only ASCII letters, digits, '.', '_' and '-' in a topic name, at most
// MaxTopicLen of them, so the namespace may use only those, and be short enough
// for the longest topic. A leading "__" is refused too: Kafka keeps such names
// for its internal topics (__consumer_offsets). A trailing separator ('.' or
// '-') keeps the names readable; it is not required.
func (n Namespace) Validate() error {
	for i, r := range string(n) {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q: character %q at %d: Kafka topic names take only ASCII letters, digits, '.', '_' and '-'", string(n), r, i)
		}
	}
	if strings.HasPrefix(string(n), "__") {
		return fmt.Errorf("%q: names starting with __ are Kafka's internal topics", string(n))
	}
	longest := ""
	for _, t := range AllTopics() {
		if len(t) > len(longest) {
			longest = t
		}
	}
	if l := len(n) + len(longest); l > MaxTopicLen {
		return fmt.Errorf("%q: too long: %s would be %d characters, and Kafka takes at most %d (the namespace may have %d)",
			string(n), longest, l, MaxTopicLen, MaxTopicLen-len(longest))
	}
	return nil
}
