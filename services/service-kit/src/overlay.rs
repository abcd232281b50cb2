/// Puts `value` over `field` when there is one: a flag over the config
/// file, a dependency table's field over the service's default for it.
///
/// ```
/// let mut listen = "127.0.0.1:8080";
/// service_kit::overlay(&mut listen, None);
/// assert_eq!(listen, "127.0.0.1:8080");
/// service_kit::overlay(&mut listen, Some("127.0.0.1:9180"));
/// assert_eq!(listen, "127.0.0.1:9180");
/// ```
pub fn overlay<T>(field: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *field = value;
    }
}
