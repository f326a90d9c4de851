package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/payoutfile"
	"paysvc/actors/aggregates/payoutfile/payoutstore"
	"paysvc/actors/rails"
	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/inproc"
)

const payoutUsage = "usage: paysvc payout finish TRANSACTION_ID --status COMPLETE|FAILED [--reference REF] [--reason TEXT]"

// payoutCmd is the operator's way to finish a payout transaction whose outcome the
// rail never reported: a Daraja B2C request whose answer was lost (never resent, so
// it waits PROCESSING) after the operator looked it up in the M-Pesa portal. The
// outcome goes through the command path like a rail's, as a payout.results command
// whose id derives from the transaction: it applies once, moves the money (or
// releases the hold) in the engine's transaction, and a transaction that already
// has its outcome ignores it.
func payoutCmd(ctx context.Context, cfg service.Config, args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 || args[0] != "finish" {
		return usageError{payoutUsage}
	}
	txnID := args[1]
	fs := flag.NewFlagSet("payout finish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	status := fs.String("status", "", "COMPLETE (the provider paid it) or FAILED (it did not)")
	reference := fs.String("reference", "", "the provider's reference (required for COMPLETE), e.g. the M-Pesa receipt")
	reason := fs.String("reason", "", "why it failed (FAILED), shown to the merchant")
	if err := fs.Parse(args[2:]); err != nil {
		return usageError{err.Error() + "\n" + payoutUsage}
	}
	if fs.NArg() > 0 {
		return usageError{payoutUsage}
	}
	switch {
	case *status == payoutfile.TxnComplete && *reference == "":
		return usageError{"--reference is required with --status COMPLETE\n" + payoutUsage}
	case *status == payoutfile.TxnFailed && *reason == "":
		*reason = "Finished by the operator: the provider did not pay it."
	case *status != payoutfile.TxnComplete && *status != payoutfile.TxnFailed:
		return usageError{"--status must be COMPLETE or FAILED\n" + payoutUsage}
	}
	db, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	ref, err := storage.PayoutTxnRef(ctx, db, txnID)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("payout transaction %q not found", txnID)
	}
	if err != nil {
		return err
	}
	file, err := payoutstore.Get(ctx, db, ref.MerchantID, ref.FileID)
	if err != nil {
		return err
	}
	var txn *payoutfile.Txn
	for i := range file.Txns {
		if file.Txns[i].TransactionID == txnID {
			txn = &file.Txns[i]
		}
	}
	if txn == nil {
		return fmt.Errorf("payout transaction %q not found in its file %s", txnID, ref.FileID)
	}
	// A PENDING transaction was never submitted: no rail has it, and the file would
	// ignore the outcome (payoutfile.Results), so say so rather than queue it.
	if file.Status != payoutfile.StatusProcessing || txn.Status != payoutfile.TxnProcessing {
		return fmt.Errorf("payout transaction %s is %s in a %s file: only a transaction waiting for its outcome (submitted, PROCESSING) can be finished",
			txnID, txn.Status, file.Status)
	}
	result := topics.PayoutTxnResult{TransactionID: txnID, Success: *status == payoutfile.TxnComplete}
	if result.Success {
		result.ProviderReference, result.Description = *reference, "Confirmed by the operator with the provider."
	} else {
		result.Description = *reason
	}
	// The operator speaks for the merchant's own environment (the operator runs
	// both): the engine checks the command against it like any other.
	m, err := storage.GetMerchant(ctx, db, ref.MerchantID)
	if err != nil {
		return err
	}
	cmd, err := rails.PayoutResultsCommand(ref.MerchantID, topics.PayoutResults{FileID: ref.FileID, MerchantID: ref.MerchantID,
		Stage: topics.PayoutStageFinal, Batch: "operator-" + txnID, Results: []topics.PayoutTxnResult{result}},
		rails.Origin{Environment: m.Environment})
	if err != nil {
		return err
	}
	value, err := topics.EncodeCommand(cmd)
	if err != nil {
		return err
	}
	brokers := cfg.KafkaBrokers
	if len(brokers) == 0 { // the embedded Kafka of `make run`
		brokers = []string{"127.0.0.1:" + strconv.Itoa(cfg.KafkaPort)}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.Dialer(inproc.Dial), kgo.ClientID("paysvc-admin"))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The deployment's command log: PAYSVC_KAFKA_NAMESPACE names it on the cluster.
	if err := cl.ProduceSync(pctx, &kgo.Record{Topic: cfg.KafkaNamespace.Topic(topics.CommandsTopic), Key: topics.CommandKey(ref.MerchantID), Value: value}).FirstErr(); err != nil {
		return fmt.Errorf("queue the outcome: %w", err)
	}
	return printJSON(stdout, map[string]any{"transaction_id": txnID, "file_id": ref.FileID, "status": *status, "command_id": cmd.ID})
}
