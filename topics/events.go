package topics

import (
	"encoding/json"
	"time"
)

// Webhook topics as the interface spec names them. Each has its own Kafka topic so
// a consumer (the webhook dispatcher, a downstream system) reads only what it needs.
const (
	CollectionEvent     = "collection_event"
	SendMoneyEvent      = "send_money_event"
	ReversalEvent       = "reversal_event"
	SubscriptionEvent   = "subscription_event"
	WalletTransferEvent = "wallet_transfer_event"
)

// EventTopics maps a webhook topic to its Kafka topic.
var EventTopics = map[string]string{
	CollectionEvent:     "paysvc.events.collection.v1",
	SendMoneyEvent:      "paysvc.events.send_money.v1",
	ReversalEvent:       "paysvc.events.reversal.v1",
	SubscriptionEvent:   "paysvc.events.subscription.v1",
	WalletTransferEvent: "paysvc.events.wallet_transfer.v1",
}

// Event is the envelope of every event record. ID is stable across redelivery: the
// relay publishes at least once and consumers dedupe on it. Key (the aggregate id)
// orders events of one aggregate.
type Event struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Version    int             `json:"version"`
	OccurredAt time.Time       `json:"occurred_at"`
	MerchantID string          `json:"merchant_id"`
	Key        string          `json:"key"`
	Payload    json.RawMessage `json:"payload"`
}

// WalletTransfer is the payload of a wallet_transfer_event: the fields the spec
// shows, plus the two wallet ids so a consumer can tell which wallets moved.
type WalletTransfer struct {
	ID                string    `json:"id"`
	FromCurrency      string    `json:"from_currency"`
	ToCurrency        string    `json:"to_currency"`
	AmountSent        string    `json:"amount_sent"`
	AmountReceived    string    `json:"amount_received"`
	ExchangeRate      string    `json:"exchange_rate"`
	Status            string    `json:"status"`
	OriginWallet      string    `json:"origin_wallet_id"`
	DestinationWallet string    `json:"destination_wallet_id"`
	Narrative         string    `json:"narrative"`
	CreatedAt         time.Time `json:"created_at"`
}
