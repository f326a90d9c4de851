// A client generated from the committed API document (api/openapi/openapi.json):
// paysvc.ts is openapi-typescript's output, written next to this file by
// TestOpenAPIGeneratedClient, and every call below is typed by it through
// openapi-fetch. tsc refuses the program when the document and these calls
// disagree; the Go test then checks what the live service answered.
import createClient from "openapi-fetch";
import type { components, paths, webhooks } from "./paysvc";

// Node's globals, without @types/node: only what this program touches.
declare const process: { env: Record<string, string | undefined>; exitCode?: number };

type Wallet = components["schemas"]["Wallet"];
type ErrorBody = components["schemas"]["Error"];
// What a webhook receiver parses: the delivery body of one topic.
type CollectionDelivery = webhooks["collection_event"]["post"]["requestBody"]["content"]["application/json"];

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(name + " is not set");
  return v;
};

const client = createClient<paths>({
  baseUrl: env("PAYSVC_BASE_URL"),
  headers: { Authorization: "Bearer " + env("PAYSVC_SECRET_KEY") },
});

// The generated types refuse a wallet the API cannot create: a document that
// lost the const would make this directive unused, and tsc fail.
const refused: components["schemas"]["WalletCreate"] = {
  currency: "KES",
  label: "never sent",
  // @ts-expect-error only WORKING wallets can be created
  wallet_type: "SETTLEMENT",
};
void refused;

// A receiver reads data with the topic's payload schema.
export function invoiceOf(d: CollectionDelivery): string {
  return d.topic + ":" + d.data.invoice_id + ":" + d.data.state;
}

type Outcome = { status: number; data?: unknown; error?: ErrorBody };

async function main(): Promise<void> {
  const out: Record<string, Outcome | string> = {};

  const list = await client.GET("/api/v1/wallets", { params: { query: { page_size: 50 } } });
  out.list = { status: list.response.status, data: list.data, error: list.error };
  const settlement: Wallet | undefined = list.data?.results.find(
    (w) => w.wallet_type === "SETTLEMENT" && w.currency === "KES",
  );
  if (!settlement) throw new Error("no KES settlement wallet: " + JSON.stringify(list.error));

  const created = await client.POST("/api/v1/wallets", {
    body: { currency: "KES", label: env("PAYSVC_LABEL"), can_disburse: true },
  });
  out.create = { status: created.response.status, data: created.data, error: created.error };
  const dest = created.data?.wallet_id;
  if (!dest) throw new Error("create: " + JSON.stringify(created.error));

  const transfer = await client.POST("/api/v1/wallets/{wallet_id}/intra_transfer", {
    params: { path: { wallet_id: settlement.wallet_id }, header: { "Idempotency-Key": env("PAYSVC_LABEL") } },
    body: { wallet_id: dest, amount: "10.00", narrative: "generated client" },
  });
  out.transfer = { status: transfer.response.status, data: transfer.data, error: transfer.error };

  // More than the new wallet holds: the error shape, typed as the document says.
  const refusedTransfer = await client.POST("/api/v1/wallets/{wallet_id}/intra_transfer", {
    params: { path: { wallet_id: dest } },
    body: { wallet_id: settlement.wallet_id, amount: "999.00", narrative: "too much" },
  });
  out.insufficient = { status: refusedTransfer.response.status, data: refusedTransfer.data, error: refusedTransfer.error };

  const missing = await client.GET("/api/v1/wallets/{wallet_id}", { params: { path: { wallet_id: "NOSUCHWALLET" } } });
  out.missing = { status: missing.response.status, data: missing.data, error: missing.error };

  const got = await client.GET("/api/v1/wallets/{wallet_id}", { params: { path: { wallet_id: dest } } });
  out.get = { status: got.response.status, data: got.data, error: got.error };
  if (got.data) {
    const balance: string = got.data.available_balance;
    out.balance = balance;
  }

  console.log(JSON.stringify(out));
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
