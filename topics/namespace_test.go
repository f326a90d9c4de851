package topics_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/topics"
)

func TestNamespaceNames(t *testing.T) {
	t.Parallel()
	ns := topics.Namespace("staging.")
	if got := ns.Topic(topics.CommandsTopic); got != "staging.paysvc.commands.v1" {
		t.Errorf("Topic = %q", got)
	}
	if got := ns.Group("paysvc-engine"); got != "staging.paysvc-engine" {
		t.Errorf("Group = %q", got)
	}
	if got := ns.Topics(topics.CommandsTopic, topics.RepliesTopic); !slices.Equal(got, []string{"staging.paysvc.commands.v1", "staging.paysvc.replies.v1"}) {
		t.Errorf("Topics = %q", got)
	}
	for _, logical := range topics.AllTopics() {
		if got := ns.Logical(ns.Topic(logical)); got != logical {
			t.Errorf("Logical(Topic(%q)) = %q", logical, got)
		}
	}
	// A name without the prefix is not the namespace's: it stays as it is.
	if got := ns.Logical("other.paysvc.commands.v1"); got != "other.paysvc.commands.v1" {
		t.Errorf("Logical of a foreign name = %q", got)
	}
	// The empty namespace is today's names, both ways.
	var none topics.Namespace
	if none.Topic(topics.CommandsTopic) != topics.CommandsTopic || none.Logical(topics.CommandsTopic) != topics.CommandsTopic ||
		none.Group("paysvc-engine") != "paysvc-engine" {
		t.Error("the empty namespace changes names")
	}
}

func TestNamespaceValidate(t *testing.T) {
	t.Parallel()
	longest := 0
	for _, l := range topics.AllTopics() {
		longest = max(longest, len(l))
	}
	room := topics.MaxTopicLen - longest
	for _, ok := range []string{"", "staging.", "t0123abcd.", "ci-42_a.B", strings.Repeat("a", room)} {
		if err := topics.Namespace(ok).Validate(); err != nil {
			t.Errorf("Validate(%q) = %v", ok, err)
		}
	}
	for bad, why := range map[string]string{
		"stag ing.":                    "character",
		"staging/":                     "character",
		"st\u00e4ging.":                "character",
		"__internal.":                  "internal",
		strings.Repeat("a", room+1):    "too long",
		"ns:" + strings.Repeat("a", 3): "character",
	} {
		err := topics.Namespace(bad).Validate()
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("Validate(%q) = %v, want an error saying %q", bad, err, why)
		}
	}
}

// EnsureTopics makes every topic of the deployment in its namespace and no other,
// and EndOffsets lists them by their names on the cluster.
func TestEnsureTopicsNamespaced(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := topics.Namespace("t1.")
	if err := topics.EnsureTopics(ctx, cl, ns, 3); err != nil {
		t.Fatal(err)
	}
	if err := topics.EnsureTopics(ctx, cl, ns, 3); err != nil { // again: they exist
		t.Fatal(err)
	}
	list, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := list.Names()
	slices.Sort(got)
	want := ns.Topics(topics.AllTopics()...)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("topics on the broker:\n%q\nwant\n%q", got, want)
	}
	if n := len(list[ns.Topic(topics.CommandsTopic)].Partitions); n != 3 {
		t.Errorf("%d command partitions, want 3", n)
	}
	ends, err := topics.EndOffsets(ctx, cl, ns, topics.CommandsTopic, topics.RepliesTopic)
	if err != nil {
		t.Fatal(err)
	}
	if len(ends) != 2 || len(ends[ns.Topic(topics.CommandsTopic)]) != 3 || len(ends[ns.Topic(topics.RepliesTopic)]) == 0 {
		t.Errorf("EndOffsets = %v, want both topics by their namespaced names", ends)
	}
}
