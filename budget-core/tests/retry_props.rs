//! Property tests of the whole retry loop, driven by the public API only:
//! whatever a dependency answers and however long it takes, the loop never
//! spends more than the budget, never starts an attempt below the floor,
//! never exceeds `max_attempts`, and a shared retry budget caps a storm.

use std::time::Duration;

use budget_core::floor::Floor;
use budget_core::retry::{
    BackoffConfig, Decision, DecisionInput, Jitter, Outcome, RetryBudget, RetryBudgetConfig,
    RetryConfig, RetryPolicy, StopReason, TransportKind,
};
use http::StatusCode;
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;

/// One scripted attempt: how long it takes and how it ends.
#[derive(Clone, Copy, Debug)]
struct Step {
    took: Duration,
    outcome: Outcome,
}

fn arb_outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        (
            prop::sample::select(vec![200u16, 404, 408, 429, 500, 502, 503, 504]),
            prop::option::of(0u64..3_000),
        )
            .prop_map(|(code, ra)| Outcome::Status {
                status: StatusCode::from_u16(code).unwrap(),
                retry_after: ra.map(Duration::from_millis),
            }),
        prop::sample::select(vec![
            TransportKind::Connect,
            TransportKind::ConnectTimeout,
            TransportKind::Timeout,
            TransportKind::Reset,
            TransportKind::Body,
        ])
        .prop_map(Outcome::Transport),
    ]
}

fn arb_step() -> impl Strategy<Value = Step> {
    (0u64..1_500, arb_outcome()).prop_map(|(took, outcome)| Step {
        took: Duration::from_millis(took),
        outcome,
    })
}

/// The default backoff without jitter.
fn exact_backoff() -> BackoffConfig {
    let mut backoff = BackoffConfig::default();
    backoff.jitter = Jitter::None;
    backoff
}

/// What one simulated call did.
struct Run {
    attempts: u32,
    spent: Duration,
    stop: Option<StopReason>,
}

/// Runs the client's loop on virtual time: each attempt is limited by what
/// remains (rule 1), each wait is paid from the budget (rule 3).
fn run(
    policy: &RetryPolicy,
    retry_budget: Option<&RetryBudget>,
    budget: Duration,
    floor: Floor,
    script: &[Step],
    rng: &mut StdRng,
) -> Run {
    let mut spent = Duration::ZERO;
    let mut attempts = 0u32;
    let mut previous_wait = None;
    if let Some(b) = retry_budget {
        b.deposit();
    }
    loop {
        let remaining = budget.saturating_sub(spent);
        if floor.check(remaining).is_err() {
            // Rule 2: below the floor, no attempt.
            return Run {
                attempts,
                spent,
                stop: None,
            };
        }
        let step = script[(attempts as usize).min(script.len() - 1)];
        // The attempt's overall limit is what remains.
        let (took, outcome) = if step.took >= remaining {
            (remaining, Outcome::Transport(TransportKind::Timeout))
        } else {
            (step.took, step.outcome)
        };
        spent += took;
        attempts += 1;
        let input = DecisionInput {
            outcome,
            attempts,
            may_retry: true,
            remaining: budget.saturating_sub(spent),
            floor,
            previous_wait,
        };
        match policy.decide(&input, retry_budget, rng) {
            Decision::Retry { after } => {
                spent += after;
                previous_wait = Some(after);
            }
            Decision::Stop(reason) => {
                return Run {
                    attempts,
                    spent,
                    stop: Some(reason),
                };
            }
        }
    }
}

proptest! {
    #[test]
    fn rule3_the_retry_loop_never_overspends_and_never_starts_below_the_floor(
        budget_ms in 1u64..5_000,
        floor_ms in 0u64..1_000,
        max_attempts in 1u32..6,
        jitter_free in any::<bool>(),
        script in prop::collection::vec(arb_step(), 1..6),
        seed in any::<u64>(),
    ) {
        let mut retry = RetryConfig::default();
        retry.max_attempts = max_attempts;
        retry.backoff.jitter = if jitter_free { Jitter::None } else { Jitter::Full };
        retry.retry_after_max = Duration::from_secs(2);
        let policy = retry.build().unwrap();
        let budget = Duration::from_millis(budget_ms);
        let floor = Floor::new(Duration::from_millis(floor_ms));
        let r = run(&policy, None, budget, floor, &script, &mut StdRng::seed_from_u64(seed));
        prop_assert!(r.spent <= budget, "spent {:?} of {:?}", r.spent, budget);
        prop_assert!(r.attempts <= max_attempts);
        // Every retry's wait left the floor for the next attempt, so the loop
        // only ends by a decision, never by finding itself below the floor
        // after a wait.
        prop_assert!(r.stop.is_some() || r.attempts == 0);
    }

    #[test]
    fn rule9_a_down_dependency_sees_at_most_one_plus_ratio_attempts_per_request(
        permille in 0u32..=1_000,
        requests in 1usize..500,
        max_attempts in 1u32..5,
    ) {
        let ratio = f64::from(permille) / 1000.0;
        let mut retry_budget = RetryBudgetConfig::default();
        retry_budget.ttl = Duration::from_secs(10);
        retry_budget.min_per_sec = 0;
        retry_budget.ratio = ratio;
        let retry_budget = retry_budget.build().unwrap();
        let mut retry = RetryConfig::default();
        retry.max_attempts = max_attempts;
        retry.backoff = exact_backoff();
        let policy = retry.build().unwrap();
        let down = [Step {
            took: Duration::from_millis(1),
            outcome: Outcome::status(StatusCode::SERVICE_UNAVAILABLE),
        }];
        let mut rng = StdRng::seed_from_u64(0);
        let attempts: u32 = (0..requests)
            .map(|_| {
                run(
                    &policy,
                    Some(&retry_budget),
                    Duration::from_secs(10),
                    Floor::default(),
                    &down,
                    &mut rng,
                )
                .attempts
            })
            .sum();
        let per_request = f64::from(attempts) / requests as f64;
        prop_assert!(per_request <= 1.0 + ratio + 1e-9, "{per_request} > 1 + {ratio}");
    }
}

#[test]
fn rule9_without_a_retry_budget_a_down_dependency_gets_every_attempt() {
    // The contrast that motivates rule 9.
    let mut retry = RetryConfig::default();
    retry.backoff = exact_backoff();
    let policy = retry.build().unwrap();
    let down = [Step {
        took: Duration::from_millis(1),
        outcome: Outcome::status(StatusCode::SERVICE_UNAVAILABLE),
    }];
    let mut rng = StdRng::seed_from_u64(0);
    let attempts: u32 = (0..100)
        .map(|_| {
            run(
                &policy,
                None,
                Duration::from_secs(10),
                Floor::default(),
                &down,
                &mut rng,
            )
            .attempts
        })
        .sum();
    assert_eq!(attempts, 300);
}
