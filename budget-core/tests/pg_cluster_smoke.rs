//! The throwaway PostgreSQL cluster harness (`support/pg_cluster.rs`) does
//! what its users rely on: a cluster answers SQL, clusters started together
//! do not collide, and a dropped cluster is gone (server and files).

#[path = "support/pg_cluster.rs"]
mod pg_cluster;

use std::net::TcpStream;

use pg_cluster::{Cluster, ClusterError};

/// Rule: a started cluster answers psql on 127.0.0.1 at the port its URL names.
#[test]
fn a_started_cluster_answers_sql() -> Result<(), ClusterError> {
    let cluster = Cluster::start()?;
    assert_eq!(cluster.psql("select 41+1")?, "42");
    assert_eq!(
        cluster.url(),
        format!("postgres://postgres@127.0.0.1:{}/postgres", cluster.port())
    );
    assert!(cluster.data_dir().join("PG_VERSION").is_file());
    Ok(())
}

/// Rule: a failing statement is a `ClusterError::Command` carrying the
/// server's message, not a panic.
#[test]
fn a_failing_statement_is_a_typed_error() -> Result<(), ClusterError> {
    let cluster = Cluster::start()?;
    let err = cluster
        .psql("select * from no_such_table")
        .expect_err("no such table");
    assert!(
        matches!(&err, ClusterError::Command { stderr, .. } if stderr.contains("no_such_table")),
        "{err}"
    );
    Ok(())
}

/// Rule: two clusters at once get different ports and data dirs, and each
/// answers on its own.
#[test]
fn two_clusters_at_once_do_not_collide() -> Result<(), ClusterError> {
    let a = Cluster::start()?;
    let b = Cluster::start()?;
    assert_ne!(a.port(), b.port());
    assert_ne!(a.data_dir(), b.data_dir());
    a.psql("create table only_in_a (id int)")?;
    assert_eq!(
        a.psql("select count(*) from pg_tables where tablename = 'only_in_a'")?,
        "1"
    );
    assert_eq!(
        b.psql("select count(*) from pg_tables where tablename = 'only_in_a'")?,
        "0"
    );
    Ok(())
}

/// Rule: drop stops the server (its port refuses connections) and removes
/// its files.
#[test]
fn a_dropped_cluster_is_gone() -> Result<(), ClusterError> {
    let cluster = Cluster::start()?;
    let port = cluster.port();
    let data_dir = cluster.data_dir();
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    drop(cluster);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "port {port} still answers"
    );
    assert!(!data_dir.exists(), "{} still exists", data_dir.display());
    let parent = data_dir
        .parent()
        .expect("the data dir is in the cluster's dir");
    assert!(!parent.exists(), "{} still exists", parent.display());
    Ok(())
}
