//! What a sweep runs: the cells of the grid its filters keep
//! ([`SweepPlan`]), how often, in which modes, and how long that takes
//! ([`SweepPlan::estimate`]).

use std::time::Duration;

use crate::chain::ChainMode;
use crate::sweep::cell::{Cell, PartnerShape, Start, SweepBudget};
use crate::warm::{WARM_FOR, WARM_SETTLE};

/// The sweep's sizes: requests at once.
pub const SIZES: [u64; 3] = [100, 600, 2000];

/// The sweep's budgets.
pub const BUDGETS: [SweepBudget; 4] = [
    SweepBudget::Fixed(Duration::from_millis(500)),
    SweepBudget::Fixed(Duration::from_secs(2)),
    SweepBudget::Fixed(Duration::from_secs(10)),
    SweepBudget::Mixed,
];

/// The sweep's starts.
pub const STARTS: [Start; 2] = [Start::Cold, Start::Warm];

/// The sweep's partner shapes.
pub const PARTNERS: [PartnerShape; 3] = [
    PartnerShape::Instant,
    PartnerShape::Delay50,
    PartnerShape::Delay50Workers8,
];

/// What one run costs besides its load, for the estimate: a partner,
/// checkout and edge started and stopped, the partner's settle and reset
/// (measured on the development machine: about half a second).
pub const RUN_OVERHEAD: Duration = Duration::from_millis(500);

/// How many requests a second the chain takes from a burst of fresh
/// connections when the partner does not limit it, for the estimate (a
/// two-core machine: edge and checkout share the cores with the client).
pub const MACHINE_RATE: f64 = 1000.0;

/// The filters of the grid; an empty list keeps every value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filters {
    /// `--sweep-start`.
    pub starts: Vec<Start>,
    /// `--sweep-size`.
    pub sizes: Vec<u64>,
    /// `--sweep-budget`.
    pub budgets: Vec<SweepBudget>,
    /// `--sweep-partner`.
    pub partners: Vec<PartnerShape>,
}

/// The values of a filter: `asked` in the grid's order when they are the
/// grid's, the others after them in the order given; `grid` when empty.
fn values<T: Copy + PartialEq>(asked: &[T], grid: &[T]) -> Vec<T> {
    if asked.is_empty() {
        return grid.to_vec();
    }
    let mut out: Vec<T> = grid.iter().copied().filter(|g| asked.contains(g)).collect();
    for a in asked {
        if !out.contains(a) {
            out.push(*a);
        }
    }
    out
}

impl Filters {
    /// The cells they keep, start outermost, then size, budget, partner.
    ///
    /// ```
    /// use load_tests::sweep::{Filters, PartnerShape, Start};
    ///
    /// assert_eq!(Filters::default().cells().len(), 72);
    /// let f = Filters { starts: vec![Start::Warm], sizes: vec![600],
    ///     partners: vec![PartnerShape::Delay50Workers8], ..Filters::default() };
    /// assert_eq!(f.cells().len(), 4);
    /// ```
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = Vec::new();
        for start in values(&self.starts, &STARTS) {
            for size in values(&self.sizes, &SIZES) {
                for budget in values(&self.budgets, &BUDGETS) {
                    for partner in values(&self.partners, &PARTNERS) {
                        cells.push(Cell {
                            start,
                            size,
                            budget,
                            partner,
                        });
                    }
                }
            }
        }
        cells
    }
}

/// A sweep: its cells, each run `repeat` times in every mode of `modes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPlan {
    /// The cells, in run order.
    pub cells: Vec<Cell>,
    /// The modes, in run order.
    pub modes: Vec<ChainMode>,
    /// How many times the cells are run (each time all of them, so that
    /// the repeats are spread over the sweep, not back to back).
    pub repeat: u32,
    /// One core kept busy by another process during the sweep
    /// ([`crate::sweep::NoisyNeighbour`]).
    pub noisy_neighbour: bool,
}

/// A sweep's estimated length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// Runs (cells x modes x repeats).
    pub runs: u64,
    /// The expected length.
    pub typical: Duration,
    /// The bound: every run's client waiting its whole patience.
    pub at_most: Duration,
}

impl SweepPlan {
    /// How long the sweep should take: per run [`RUN_OVERHEAD`], the
    /// warm-up (its 3 s, the last answer, the settle), and the burst: the
    /// time the chain needs to drain it (its size over the partner's
    /// rate, or [`MACHINE_RATE`]) plus the partner's delay, at most the
    /// client's patience (which bounds [`Estimate::at_most`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::chain::ChainMode;
    /// use load_tests::sweep::{Filters, SweepPlan};
    ///
    /// let plan = SweepPlan { cells: Filters::default().cells(), modes: ChainMode::ALL.to_vec(),
    ///     repeat: 1, noisy_neighbour: false };
    /// let e = plan.estimate();
    /// assert_eq!(e.runs, 360);
    /// assert!(e.typical < e.at_most && e.at_most < Duration::from_secs(2 * 3600));
    /// ```
    pub fn estimate(&self) -> Estimate {
        let per_mode = |cell: &Cell, bound: bool| {
            let warm = match cell.start {
                Start::Cold => Duration::ZERO,
                Start::Warm => WARM_FOR + WARM_SETTLE + Duration::from_millis(100),
            };
            let patience = cell.patience();
            let burst = if bound {
                patience
            } else {
                let rate = cell.partner.workers().map_or(MACHINE_RATE, |w| {
                    (w as f64 / cell.partner.delay().as_secs_f64()).min(MACHINE_RATE)
                });
                let drain = Duration::from_secs_f64(cell.size as f64 / rate);
                (drain + cell.partner.delay()).min(patience)
            };
            RUN_OVERHEAD + warm + burst
        };
        let modes = self.modes.len() as u32 * self.repeat;
        let sum = |bound| {
            self.cells
                .iter()
                .map(|c| per_mode(c, bound) * modes)
                .sum::<Duration>()
        };
        Estimate {
            runs: self.cells.len() as u64 * u64::from(modes),
            typical: sum(false),
            at_most: sum(true),
        }
    }
}
