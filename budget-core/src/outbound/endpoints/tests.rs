use std::sync::atomic::AtomicU32;

use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn name() -> Arc<str> {
    Arc::from("partner")
}

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

fn list(base: &str, entries: &[&str]) -> Result<Endpoints, ConfigError> {
    let entries: Vec<String> = entries.iter().map(|s| (*s).to_owned()).collect();
    Endpoints::new(
        &name(),
        &url(base),
        &entries,
        DEFAULT_RESOLVE_INTERVAL,
        None,
        None,
    )
}

/// A scripted resolver (no test asks an outside DNS server): each lookup
/// answers the next of `answers`, the last one repeated.
fn scripted(
    answers: Vec<Result<Vec<&'static str>, &'static str>>,
) -> (resolve::Lookup, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let lookup: resolve::Lookup = Arc::new(move |host: String, port: u16| {
        let n = counted.fetch_add(1, Ordering::SeqCst) as usize;
        let answer = answers[n.min(answers.len() - 1)].clone();
        Box::pin(async move {
            match answer {
                Ok(ips) => Ok(ips
                    .iter()
                    .map(|ip| SocketAddr::new(ip.parse().unwrap(), port))
                    .collect()),
                Err(reason) => Err(ResolveError::new(&host, reason)),
            }
        })
    });
    (lookup, calls)
}

fn labels(set: &[Arc<Endpoint>]) -> Vec<String> {
    set.iter().map(|e| e.label.to_string()).collect()
}

#[test]
fn an_address_an_https_name_or_no_resolving_is_one_endpoint_the_url_as_it_is() {
    for base in [
        "http://127.0.0.1:9000/p",
        "http://[::1]:9000/p",
        "https://partner.example/p",
    ] {
        let e = list(base, &[]).unwrap();
        let only = e.only().unwrap_or_else(|| panic!("{base}"));
        assert!(only.target.is_none(), "{base}");
    }
    let e = Endpoints::new(
        &name(),
        &url("http://partner:9000"),
        &[],
        Duration::ZERO,
        None,
        None,
    )
    .unwrap();
    assert_eq!(&*e.only().unwrap().label, "partner:9000");
    let e = list("http://partner:9000", &[]).unwrap();
    assert!(e.only().is_none(), "an http name is resolved");
}

#[test]
fn a_list_replaces_scheme_host_and_port_and_keeps_path_and_query() {
    let e = list(
        "http://pricing.internal/v1/quote?k=1",
        &["http://127.0.0.1:9001", "https://[::1]:9443/"],
    )
    .unwrap();
    let set = e.current();
    assert_eq!(labels(&set), ["127.0.0.1:9001", "[::1]:9443"]);
    assert_eq!(&*set[1].metric_label, "https://[::1]:9443");
    let mut u = url("http://pricing.internal/v1/quote?k=1");
    set[1].target.as_ref().unwrap().apply(&mut u);
    assert_eq!(u.as_str(), "https://[::1]:9443/v1/quote?k=1");
    let mut u = url("http://pricing.internal/v1/quote?k=1");
    set[0].target.as_ref().unwrap().apply(&mut u);
    assert_eq!(u.as_str(), "http://127.0.0.1:9001/v1/quote?k=1");
}

#[test]
fn a_bad_entry_is_an_error_naming_it() {
    let field = |entries: &[&str]| {
        let e = list("http://127.0.0.1:9000", entries).unwrap_err();
        (e.field().to_owned(), e.problem().to_owned())
    };
    let (f, p) = field(&["http://127.0.0.1:9001", "not a url"]);
    assert_eq!(f, "endpoints[1]");
    assert!(p.starts_with("`not a url` is not an absolute URL"), "{p}");
    let (f, p) = field(&["ftp://127.0.0.1:21"]);
    assert_eq!(
        (f.as_str(), p.as_str()),
        (
            "endpoints[0]",
            "`ftp://127.0.0.1:21` must be http or https, not \"ftp\""
        )
    );
    let (_, p) = field(&["http://127.0.0.1:9001/inventory"]);
    assert!(p.contains("must be scheme://host:port only"), "{p}");
    let (_, p) = field(&["http://127.0.0.1:9001?x=1"]);
    assert!(p.contains("must be scheme://host:port only"), "{p}");
    let (_, p) = field(&["http://u:p@127.0.0.1:9001"]);
    assert!(p.contains("credentials"), "{p}");
    let (f, p) = field(&["http://127.0.0.1:9001", "http://127.0.0.1:9001/"]);
    assert_eq!(
        (f.as_str(), p.as_str()),
        ("endpoints[1]", "repeats `127.0.0.1:9001`")
    );
}

#[test]
fn past_the_labelled_count_endpoints_share_one_metric_label() {
    let entries: Vec<String> = (0..20)
        .map(|i| format!("http://127.0.0.1:{}", 9000 + i))
        .collect();
    let refs: Vec<&str> = entries.iter().map(String::as_str).collect();
    let e = list("http://127.0.0.1:9000", &refs).unwrap();
    let set = e.current();
    assert_eq!(&*set[0].metric_label, "http://127.0.0.1:9000");
    assert_eq!(
        &*set[MAX_LABELLED - 1].metric_label,
        "http://127.0.0.1:9015"
    );
    assert_eq!(&*set[MAX_LABELLED].metric_label, OTHER_LABEL);
}

/// `http://partner`'s endpoints, looked up by `lookup` every second.
fn partner_every_second(lookup: resolve::Lookup) -> Endpoints {
    Endpoints::build(
        &name(),
        &url("http://partner"),
        &[],
        ms(1000),
        (None, None),
        lookup,
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_name_is_resolved_at_its_first_call_each_address_an_endpoint_that_keeps_the_host() {
    let (lookup, calls) = scripted(vec![Ok(vec!["10.0.0.1", "10.0.0.2"])]);
    let e = Endpoints::build(
        &name(),
        &url("http://partner:9000/p"),
        &[],
        ms(5000),
        (None, None),
        lookup,
    )
    .unwrap();
    assert!(e.current().is_empty());
    let set = e.for_call(None).await.unwrap();
    assert_eq!(labels(&set), ["10.0.0.1:9000", "10.0.0.2:9000"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let target = set[0].target.as_ref().unwrap();
    assert_eq!(target.host_header.as_ref().unwrap(), "partner:9000");
    let mut u = url("http://partner:9000/p?q=1");
    target.apply(&mut u);
    assert_eq!(u.as_str(), "http://10.0.0.1:9000/p?q=1");
    // Within the interval the set is served as it is.
    e.for_call(None).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_refresh_keeps_known_endpoints_state_starts_new_ones_cold_and_drops_gone_ones() {
    let (lookup, calls) = scripted(vec![
        Ok(vec!["10.0.0.1", "10.0.0.2"]),
        Ok(vec!["10.0.0.2", "10.0.0.3"]),
    ]);
    let e = Endpoints::build(
        &name(),
        &url("http://partner"),
        &[],
        ms(5000),
        (None, None),
        lookup,
    )
    .unwrap();
    let before = e.for_call(None).await.unwrap();
    before[1].load.observe(ms(30), Instant::now());
    let in_flight = before[0].start();
    tokio::time::advance(ms(5000)).await;
    // This call is served the old set and starts a refresh in the background.
    assert_eq!(
        labels(&e.for_call(None).await.unwrap()),
        ["10.0.0.1:80", "10.0.0.2:80"]
    );
    tokio::task::yield_now().await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let after = e.current();
    assert_eq!(labels(&after), ["10.0.0.2:80", "10.0.0.3:80"]);
    assert!(
        Arc::ptr_eq(&before[1], &after[0]),
        "a known endpoint keeps its state"
    );
    assert_eq!(
        after[0].load.estimate(Instant::now()),
        before[1].load.estimate(Instant::now())
    );
    assert_eq!(
        after[1].load.estimate(Instant::now()),
        None,
        "a new one starts cold"
    );
    // The gone one's call in flight finishes on its own reference.
    assert_eq!(before[0].outstanding(), 1);
    drop(in_flight);
    assert_eq!(before[0].outstanding(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_failed_refresh_keeps_the_last_good_set_and_a_name_never_resolved_is_an_error() {
    let (lookup, calls) = scripted(vec![Ok(vec!["10.0.0.1"]), Err("server failure")]);
    let e = partner_every_second(lookup);
    e.for_call(None).await.unwrap();
    tokio::time::advance(ms(1000)).await;
    e.for_call(None).await.unwrap();
    tokio::task::yield_now().await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(labels(&e.current()), ["10.0.0.1:80"]);
    // The next try waits another interval.
    e.for_call(None).await.unwrap();
    tokio::task::yield_now().await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let (lookup, _) = scripted(vec![Err("no such host")]);
    let e = partner_every_second(lookup);
    let err = e.for_call(None).await.unwrap_err();
    assert_eq!(err.to_string(), "cannot resolve `partner`: no such host");
}

#[tokio::test(start_paused = true)]
async fn a_first_lookup_is_bounded_by_the_budget() {
    let lookup: resolve::Lookup = Arc::new(|_, _| Box::pin(std::future::pending()));
    let e = partner_every_second(lookup);
    let until = Instant::now() + ms(50);
    let err = e.for_call(Some(until)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot resolve `partner`: the lookup did not finish within the budget"
    );
    assert_eq!(Instant::now(), until);
}
