//! `recs-slow`: recommendations [`ChainSettings::slowdown`] times slower.

use crate::chain::{ChainSettings, RECOMMENDATIONS};
use crate::scenario::{Scenario, Setup};

/// The `recs-slow` scenario.
#[derive(Clone, Copy, Debug)]
pub struct RecsSlow;

impl Scenario for RecsSlow {
    fn name(&self) -> &'static str {
        "recs-slow"
    }

    fn about(&self) -> &'static str {
        "Recommendations is `slowdown` times slower"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let f = settings.slowdown;
        Setup {
            recommendations: RECOMMENDATIONS.query(f),
            ..Setup::new(self.name(), format!("recommendations {f}x slower"), settings)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_recommendations_is_slower() {
        let recs = RecsSlow.setup(&ChainSettings::default());
        assert_eq!(recs.recommendations, "delay=250ms&jitter=100ms");
        assert_eq!(recs.pricing, "delay=45ms&jitter=10ms");
    }
}
