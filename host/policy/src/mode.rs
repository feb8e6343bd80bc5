//! What each permission mode lets run without asking. [`Mode`] itself is
//! protocol data: front-ends set it.

use crate::protocol::{Effect, Mode};

/// Whether `mode` lets `effect` happen without asking.
pub(super) fn runs(mode: Mode, effect: Effect) -> bool {
    match mode {
        Mode::ReadOnly | Mode::Ask => effect == Effect::Read,
        Mode::AutoEdit => matches!(effect, Effect::Read | Effect::Write),
        Mode::FullAuto => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Action::DenyAndStop;
    use crate::protocol::Mode;
    use Mode::Ask;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn modes_parse_and_serialize() {
        for mode in Mode::ALL {
            assert_eq!(mode.as_str().parse::<Mode>(), Ok(mode));
            assert_eq!(serde_json::to_value(mode).unwrap(), json!(mode.as_str()));
            assert_eq!(
                serde_json::from_value::<Mode>(json!(mode.as_str())).unwrap(),
                mode
            );
        }
        assert_eq!(Mode::default(), Ask);
        assert!(runs(Mode::AutoEdit, Effect::Write));
        assert!(!runs(Ask, Effect::Write));
        assert!(!runs(Mode::AutoEdit, Effect::Execute));
        assert_eq!(
            "yolo".parse::<Mode>(),
            Err(
                "unknown permission mode `yolo`; use one of: read-only, ask, auto-edit, full-auto"
                    .into()
            )
        );
        assert_eq!(
            serde_json::to_value(DenyAndStop).unwrap(),
            json!("deny-and-stop")
        );
    }
}
