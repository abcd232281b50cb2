//! tonic: a server behind the budget layer, a client through
//! `GrpcBudgetLayer`.
//!
//! Two tonic servers of the `budget.partner.v1.Partner` service (generated
//! from `services/partner-grpc/proto/partner.proto` with protox, so no
//! protoc is needed), each behind `BudgetLayer`: `checkout` calls
//! `inventory` through a channel wrapped in `GrpcBudgetLayer`. A plain
//! tonic client calls `checkout` with a timeout, which tonic sends as
//! `grpc-timeout`; checkout's handler sees it as its budget, and its call
//! to inventory is sent what is left less the reserve, as `grpc-timeout`
//! again. The ledger comes back in the `server-timing` metadata.
//!
//! Two calls: one with 1 s, answered; one with 100 ms, less than the
//! 200 ms floor of inventory, so checkout does not make that call and
//! answers `DEADLINE_EXCEEDED` at once. Loopback only; exits by itself.
//!
//! ```sh
//! cargo run -p budget-examples --bin tonic_server_client
//! ```

use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use budget_core::context;
use budget_core::grpc::{GrpcBudgetLayer, GrpcBudgetService};
use budget_core::server::ServerConfig;
use partner_grpc::partner_client::PartnerClient;
use partner_grpc::partner_server::{Partner, PartnerServer};
use partner_grpc::{CallReply, CallRequest};
use tonic::metadata::MetadataMap;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};

/// Milliseconds left of the budget the handler runs in.
fn ms_left() -> u128 {
    context::current_budget().map_or(0, |b| b.remaining().as_millis())
}

/// The dependency: answers with the budget it was given.
struct Inventory;

#[tonic::async_trait]
impl Partner for Inventory {
    async fn call(&self, _: Request<CallRequest>) -> Result<Response<CallReply>, Status> {
        let body = format!("inventory had {} ms", ms_left());
        Ok(Response::new(CallReply { body }))
    }
}

/// The middle hop: calls inventory within its own budget.
struct Checkout {
    inventory: PartnerClient<GrpcBudgetService<Channel>>,
}

#[tonic::async_trait]
impl Partner for Checkout {
    async fn call(&self, _: Request<CallRequest>) -> Result<Response<CallReply>, Status> {
        let own = ms_left();
        let mut inventory = self.inventory.clone();
        let reply = inventory
            .call(CallRequest {
                path: "/inventory".into(),
                query: String::new(),
            })
            .await?;
        let body = format!("checkout had {own} ms, {}", reply.into_inner().body);
        Ok(Response::new(CallReply { body }))
    }
}

/// Serves `service` behind the budget layer on a loopback port of its own.
async fn serve<P: Partner>(service: P) -> Result<SocketAddr, Box<dyn Error>> {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse()?)?;
    let addr = incoming.local_addr()?;
    let layer = ServerConfig::default().layer()?;
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(PartnerServer::new(service))
            .serve_with_incoming(incoming),
    );
    Ok(addr)
}

/// The `server-timing` entries of an answer's metadata, one per line.
fn print_ledger(metadata: &MetadataMap) {
    let ledger = metadata
        .get("server-timing")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    println!("ledger (server-timing):");
    for entry in ledger.split(", ") {
        println!("  {entry}");
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let inventory = serve(Inventory).await?;
    // The channel to inventory spends the budget of the request it is
    // called in; below 200 ms the call is not made.
    let channel = Channel::from_shared(format!("http://{inventory}"))?.connect_lazy();
    let channel = tower::ServiceBuilder::new()
        .layer(GrpcBudgetLayer::new("inventory").floor(Duration::from_millis(200)))
        .service(channel);
    let checkout = serve(Checkout {
        inventory: PartnerClient::new(channel),
    })
    .await?;

    let mut client = PartnerClient::connect(format!("http://{checkout}")).await?;

    let mut req = Request::new(CallRequest::default());
    req.set_timeout(Duration::from_secs(1));
    let res = client.call(req).await?;
    println!("call with a 1 s timeout -> OK: {}", res.get_ref().body);
    print_ledger(res.metadata());

    let mut req = Request::new(CallRequest::default());
    req.set_timeout(Duration::from_millis(100));
    match client.call(req).await {
        Err(status) if status.code() == tonic::Code::DeadlineExceeded => {
            println!(
                "call with a 100 ms timeout -> {:?}: {}",
                status.code(),
                status.message()
            );
            print_ledger(status.metadata());
            Ok(())
        }
        other => Err(format!("expected DEADLINE_EXCEEDED, got {other:?}").into()),
    }
}
