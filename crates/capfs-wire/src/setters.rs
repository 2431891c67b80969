//! `with_<field>` setters for the `#[non_exhaustive]` structs, which callers outside the crate
//! cannot build with a literal: they start from `default()` (or `new()`) and set what differs.

/// Writes one `#[must_use]` setter per listed field, each documented by a link to its field.
macro_rules! with_setters {
    ($ty:ty { $($setter:ident => $field:ident: $fty:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($field), "`](Self::", stringify!($field), ").")]
                #[must_use]
                pub fn $setter(mut self, $field: $fty) -> Self {
                    self.$field = $field;
                    self
                }
            )*
        }
    };
}
