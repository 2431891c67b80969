//! Properties of the generated-image path scheme.

use super::*;

fn hostile_id() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        Just(String::new()),
        Just("..".to_string()),
        Just(".".to_string()),
        Just("/".to_string()),
        Just("a/../../b".to_string()),
        Just("\0".to_string()),
        "[./\\\\\0a-zé_-]{0,12}",
    ]
}

proptest! {
    #![proptest_config(Config { cases: cases(512), ..Config::default() })]

    #[test]
    fn sanitize_is_safe_idempotent_and_length_preserving(id in hostile_id()) {
        let out = sanitize(&id);
        prop_assert!(!out.is_empty());
        prop_assert!(out.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{:?}", out);
        prop_assert_eq!(sanitize(&out), out.clone());
        if id.is_empty() {
            prop_assert_eq!(out, "generated_image");
        } else {
            prop_assert_eq!(out.chars().count(), id.chars().count());
        }
    }

    #[test]
    fn artifact_path_is_two_components_below_generated_images(
        home in prop_oneof![Just("/".to_string()), Just("/home/agent".to_string()), "/[a-z./]{0,10}"],
        session_id in hostile_id(),
        call_id in hostile_id(),
    ) {
        let home = AbsolutePathBuf::try_from(home).unwrap();
        let path = image_generation_artifact_path(&home, &session_id, &call_id);
        let images = home.join("generated_images").unwrap();
        let rel = path.strip_prefix(&images).expect("under home/generated_images");
        let parts: Vec<Component<'_>> = rel.components().collect();
        let file_name = format!("{}.png", sanitize(&call_id));
        let session = sanitize(&session_id);
        prop_assert_eq!(
            parts,
            vec![Component::Normal(session.as_ref()), Component::Normal(file_name.as_ref())]
        );
    }
}
