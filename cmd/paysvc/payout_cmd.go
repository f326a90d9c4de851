package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/payout"
	"paysvc/actors/aggregates/payout/payoutstore"
	"paysvc/actors/rails"
	"paysvc/actors/values/ids"
	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/inproc"
)

const payoutUsage = `usage: paysvc payout finish TRANSACTION_ID --status COMPLETE|FAILED [--reference REF] [--reason TEXT]
       paysvc payout hold FILE_ID [--reason TEXT] [--by NAME]
       paysvc payout release FILE_ID [--reason TEXT] [--by NAME]
       paysvc payout fail FILE_ID --reason TEXT [--by NAME]`

// payoutCmd is the operator's way to finish a payout transaction whose outcome the
// rail never reported: a Daraja B2C request whose answer was lost (never resent, so
// it waits PROCESSING) after the operator looked it up in the M-Pesa portal. The
// outcome goes through the command path like a rail's, as a payout.results command
// whose id derives from the transaction: it applies once, moves the money (or
// releases the hold) in the engine's transaction, and a transaction that already
// has its outcome ignores it.
func payoutCmd(ctx context.Context, cfg service.Config, args []string, stdout, stderr io.Writer) error {
	if len(args) >= 2 {
		if typ, ok := operatorCommands[args[0]]; ok {
			return payoutOperatorCmd(ctx, cfg, typ, args, stdout, stderr)
		}
	}
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
	case *status == payout.TxnComplete && *reference == "":
		return usageError{"--reference is required with --status COMPLETE\n" + payoutUsage}
	case *status == payout.TxnFailed && *reason == "":
		*reason = "Finished by the operator: the provider did not pay it."
	case *status != payout.TxnComplete && *status != payout.TxnFailed:
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
	var txn *payout.Txn
	for i := range file.Txns {
		if file.Txns[i].TransactionID == txnID {
			txn = &file.Txns[i]
		}
	}
	if txn == nil {
		return fmt.Errorf("payout transaction %q not found in its file %s", txnID, ref.FileID)
	}
	// A PENDING transaction was never submitted: no rail has it, and the file would
	// ignore the outcome (payout.Results), so say so rather than queue it.
	if file.Status != payout.StatusProcessing || txn.Status != payout.TxnProcessing {
		return fmt.Errorf("payout transaction %s is %s in a %s file: only a transaction waiting for its outcome (submitted, PROCESSING) can be finished",
			txnID, txn.Status, file.Status)
	}
	result := topics.PayoutTxnResult{TransactionID: txnID, Success: *status == payout.TxnComplete}
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
	if err := produceCommand(ctx, cfg, cmd); err != nil {
		return fmt.Errorf("queue the outcome: %w", err)
	}
	return printJSON(stdout, map[string]any{"transaction_id": txnID, "file_id": ref.FileID, "status": *status, "command_id": cmd.ID})
}

// produceCommand puts an operator's command on the deployment's command log.
func produceCommand(ctx context.Context, cfg service.Config, cmd topics.Command) error {
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
	return cl.ProduceSync(pctx, &kgo.Record{Topic: cfg.KafkaNamespace.Topic(topics.CommandsTopic), Key: topics.CommandKey(cmd.MerchantID), Value: value}).FirstErr()
}

// operatorCommands are the operator's kill switches of one payment file.
var operatorCommands = map[string]string{"hold": topics.CmdPayoutHold, "release": topics.CmdPayoutRelease, "fail": topics.CmdPayoutFail}

// operatorWait bounds how long the CLI waits for the engine to apply an
// operator's command (it is applied later all the same: the command is queued).
var operatorWait = 30 * time.Second

// payoutOperatorCmd holds, releases or fails one payment file being paid. Each is a
// command through the engine (payoutkind), so it is ordered with the file's other
// commands in the merchant's partition and applies in the engine's transaction:
// hold and release move no money; fail releases the hold of every transaction no
// rail was handed (PENDING) and leaves the others to their outcome. Who, when and
// why go into the file's audit (operator_actions in its stored header), the
// engine's log, and a send_money_event (and its webhooks) with the action. The CLI
// waits for the engine's answer and prints it; a file of another state, or of
// nothing to change, answers so and changes nothing.
func payoutOperatorCmd(ctx context.Context, cfg service.Config, typ string, args []string, stdout, stderr io.Writer) error {
	verb, fileID := args[0], args[1]
	fs := flag.NewFlagSet("payout "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	reason := fs.String("reason", "", "why: kept in the file's audit; for fail, shown to the merchant (required)")
	by := fs.String("by", operatorName(), "who gives the command, for the audit (default: the operating-system user)")
	if err := fs.Parse(args[2:]); err != nil {
		return usageError{err.Error() + "\n" + payoutUsage}
	}
	*reason, *by = strings.TrimSpace(*reason), strings.TrimSpace(*by)
	switch {
	case fs.NArg() > 0 || fileID == "" || strings.HasPrefix(fileID, "-"):
		return usageError{payoutUsage}
	case typ == topics.CmdPayoutFail && *reason == "":
		return usageError{"--reason is required with fail: the merchant is shown it\n" + payoutUsage}
	case *by == "":
		return usageError{"--by is required: no operating-system user to name\n" + payoutUsage}
	case len(*reason) > 500 || len(*by) > 100 || !utf8.ValidString(*reason) || !utf8.ValidString(*by):
		return usageError{"--reason is at most 500 and --by at most 100 bytes of UTF-8\n" + payoutUsage}
	}
	db, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	merchantID, err := storage.PayoutFileMerchant(ctx, db, fileID)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("payment file %q not found", fileID)
	}
	if err != nil {
		return err
	}
	// A clear answer before anything is queued; the engine checks again, in order
	// with the file's other commands, and has the last word.
	file, err := payoutstore.Get(ctx, db, merchantID, fileID)
	if err != nil {
		return err
	}
	if file.Status != payout.StatusProcessing {
		return fmt.Errorf("payment file %s is %s: only a file being paid (PROCESSING) can be held, released or failed; nothing changed", fileID, file.Status)
	}
	m, err := storage.GetMerchant(ctx, db, merchantID)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(topics.PayoutOperator{FileID: fileID, By: *by, Reason: *reason})
	if err != nil {
		return err
	}
	// A fresh id: each hold, release or fail is its own operation (hold, release,
	// hold again), never a retry of an earlier one.
	cmd := topics.Command{ID: ids.UUID(), Type: typ, Version: 1, MerchantID: merchantID, IssuedAt: time.Now().UTC(),
		Environment: m.Environment, FreshID: true, Payload: payload}
	if err := produceCommand(ctx, cfg, cmd); err != nil {
		return fmt.Errorf("queue the %s: %w", verb, err)
	}
	reply, err := awaitReply(ctx, db, merchantID, cmd.ID)
	if err != nil {
		return fmt.Errorf("%s of %s queued as command %s, but: %w", verb, fileID, cmd.ID, err)
	}
	if reply.Error != nil {
		return fmt.Errorf("%s of payment file %s refused: %s", verb, fileID, reply.Error.Detail)
	}
	var res map[string]any
	if err := json.Unmarshal(reply.Result, &res); err != nil {
		return fmt.Errorf("the engine's answer: %w", err)
	}
	res["command_id"], res["merchant_id"], res["by"] = cmd.ID, merchantID, *by
	return printJSON(stdout, res)
}

// awaitReply waits for the engine's stored answer to a command.
func awaitReply(ctx context.Context, db *sqlx.DB, merchantID, commandID string) (topics.Reply, error) {
	deadline := time.Now().Add(operatorWait)
	for {
		raw, ok, err := storage.ProcessedReply(ctx, db, merchantID, commandID)
		if err != nil {
			return topics.Reply{}, err
		}
		if ok {
			var r topics.Reply
			if err := json.Unmarshal(raw, &r); err != nil {
				return topics.Reply{}, fmt.Errorf("the engine's answer: %w", err)
			}
			return r, nil
		}
		if time.Now().After(deadline) {
			return topics.Reply{}, errors.New("the engine has not applied it yet (is an engine running?); it applies when one does")
		}
		select {
		case <-ctx.Done():
			return topics.Reply{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// operatorName is who runs the CLI, for the audit.
func operatorName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}
