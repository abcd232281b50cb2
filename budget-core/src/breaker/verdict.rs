//! [`Verdict`]: how a call went, as far as the breaker is concerned.

use http::StatusCode;

/// How a call went, as far as the breaker is concerned.
///
/// # Example
///
/// ```
/// use budget_core::breaker::Verdict;
/// use http::StatusCode;
///
/// assert_eq!(Verdict::from_status(StatusCode::OK), Verdict::Success);
/// assert_eq!(Verdict::from_status(StatusCode::BAD_GATEWAY), Verdict::Failure);
/// assert_eq!(Verdict::from_status(StatusCode::NOT_FOUND), Verdict::Neutral);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// The endpoint worked: resets the consecutive-failure count, and closes
    /// a half-open breaker.
    Success,
    /// The endpoint did not work (a `5xx`, `401`, `429` or a transport
    /// error): counts towards opening, and re-opens a half-open breaker.
    Failure,
    /// Says nothing about the endpoint's health (a `404`, a redirect, a
    /// cancelled call): neither counts nor resets; frees a half-open
    /// breaker's probe slot.
    Neutral,
    /// No answer came before the call's time ran out. The breaker judges
    /// it by how long the call went unanswered (see the
    /// [module docs](super#a-dependency-that-stops-answering)): cut short
    /// by its caller's small budget (below the endpoint's typical
    /// latency) it is neutral; past the silence limit, with nothing else
    /// answered meanwhile, it counts towards `timeout_threshold` as well
    /// as being a failure; otherwise, and before the first success, it is
    /// a failure.
    TimedOut,
}

impl Verdict {
    /// Classifies a response status: `5xx`, `401` and `429` are failures,
    /// `2xx` is success, every other status (`1xx`, `3xx`, the other `4xx`)
    /// is neutral.
    ///
    /// `401` counts as a failure because a dependency refusing our
    /// credentials fails every call until someone intervenes; `429` because
    /// the endpoint is asking us to back off.
    ///
    /// ```
    /// # use budget_core::breaker::Verdict;
    /// # use http::StatusCode;
    /// assert_eq!(Verdict::from_status(StatusCode::UNAUTHORIZED), Verdict::Failure);
    /// assert_eq!(Verdict::from_status(StatusCode::TOO_MANY_REQUESTS), Verdict::Failure);
    /// assert_eq!(Verdict::from_status(StatusCode::NO_CONTENT), Verdict::Success);
    /// assert_eq!(Verdict::from_status(StatusCode::FOUND), Verdict::Neutral);
    /// ```
    pub fn from_status(status: StatusCode) -> Self {
        if status.is_server_error()
            || status == StatusCode::UNAUTHORIZED
            || status == StatusCode::TOO_MANY_REQUESTS
        {
            Verdict::Failure
        } else if status.is_success() {
            Verdict::Success
        } else {
            Verdict::Neutral
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_401_429_and_5xx_are_failures_404_is_neutral() {
        for code in [401, 429, 500, 502, 503, 504, 599] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(Verdict::from_status(status), Verdict::Failure, "{code}");
        }
        for code in [100, 301, 304, 400, 403, 404, 408, 409, 422, 499] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(Verdict::from_status(status), Verdict::Neutral, "{code}");
        }
        for code in [200, 201, 204, 299] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(Verdict::from_status(status), Verdict::Success, "{code}");
        }
    }
}
