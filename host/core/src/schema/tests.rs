use super::Validators;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// `schema`'s verdict on `value`, through a fresh cache.
fn check(schema: &Value, value: &Value) -> Result<(), String> {
    Validators::default()
        .validate("tool", schema, value)
        .map_err(|e| e.to_string())
}

/// Representative cases of the JSON-Schema-Test-Suite (draft 2020-12) for
/// the keywords tool schemas use, each as the suite describes it:
/// `(keyword, what the suite says, schema, instance, valid)`.
fn suite() -> Vec<(&'static str, &'static str, Value, Value, bool)> {
    let one_of = json!({"oneOf": [{"type": "integer"}, {"minimum": 2}]});
    let one_of_base = json!({"type": "string", "oneOf": [{"minLength": 2}, {"maxLength": 4}]});
    let any_of = json!({"anyOf": [{"type": "integer"}, {"minimum": 2}]});
    let required = json!({"properties": {"foo": {}, "bar": {}}, "required": ["foo"]});
    let integer = json!({"type": "integer"});
    let number = json!({"type": "number"});
    let multiple = json!({"type": ["integer", "string"]});
    let enum_simple = json!({"enum": [1, 2, 3]});
    let enum_mixed = json!({"enum": [6, "foo", [], true, {"foo": 12}]});
    let enum_false = json!({"enum": [false]});
    let constant = json!({"const": 2});
    let const_object = json!({"const": {"foo": "bar", "baz": "bax"}});
    let properties = json!({"properties": {"foo": {"type": "integer"}, "bar": {"type": "string"}}});
    let additional = json!({
        "properties": {"foo": {}, "bar": {}},
        "patternProperties": {"^v": {}},
        "additionalProperties": false
    });
    let additional_schema =
        json!({"properties": {"foo": {}, "bar": {}}, "additionalProperties": {"type": "boolean"}});
    let items = json!({"items": {"type": "integer"}});
    let prefix_items = json!({"prefixItems": [{}, {}, {}], "items": false});
    let minimum = json!({"minimum": 1.1});
    let minimum_signed = json!({"minimum": -2});
    let maximum = json!({"maximum": 3.0});
    let pattern = json!({"pattern": "^a*$"});
    let unanchored = json!({"pattern": "a+"});
    vec![
        ("oneOf", "first oneOf valid", one_of.clone(), json!(1), true),
        (
            "oneOf",
            "second oneOf valid",
            one_of.clone(),
            json!(2.5),
            true,
        ),
        ("oneOf", "both oneOf valid", one_of.clone(), json!(3), false),
        ("oneOf", "neither oneOf valid", one_of, json!(1.5), false),
        (
            "oneOf",
            "mismatch base schema",
            one_of_base.clone(),
            json!(3),
            false,
        ),
        (
            "oneOf",
            "one oneOf valid",
            one_of_base.clone(),
            json!("foobar"),
            true,
        ),
        (
            "oneOf",
            "both oneOf valid (base)",
            one_of_base,
            json!("foo"),
            false,
        ),
        ("anyOf", "first anyOf valid", any_of.clone(), json!(1), true),
        (
            "anyOf",
            "second anyOf valid",
            any_of.clone(),
            json!(2.5),
            true,
        ),
        ("anyOf", "both anyOf valid", any_of.clone(), json!(3), true),
        ("anyOf", "neither anyOf valid", any_of, json!(1.5), false),
        (
            "required",
            "present required property is valid",
            required.clone(),
            json!({"foo": 1}),
            true,
        ),
        (
            "required",
            "non-present required property is invalid",
            required.clone(),
            json!({"bar": 1}),
            false,
        ),
        ("required", "ignores arrays", required, json!([]), true),
        (
            "type",
            "an integer is an integer",
            integer.clone(),
            json!(1),
            true,
        ),
        (
            "type",
            "a float with zero fractional part is an integer",
            integer.clone(),
            json!(1.0),
            true,
        ),
        (
            "type",
            "a float is not an integer",
            integer.clone(),
            json!(1.1),
            false,
        ),
        (
            "type",
            "a string is still not an integer, even if it looks like one",
            integer,
            json!("1"),
            false,
        ),
        (
            "type",
            "an integer is a number",
            number.clone(),
            json!(1),
            true,
        ),
        ("type", "null is not a number", number, json!(null), false),
        (
            "type",
            "multiple types: a string is valid",
            multiple.clone(),
            json!("foo"),
            true,
        ),
        (
            "type",
            "multiple types: a float is invalid",
            multiple,
            json!(1.1),
            false,
        ),
        (
            "enum",
            "one of the enum is valid",
            enum_simple.clone(),
            json!(1),
            true,
        ),
        (
            "enum",
            "something else is invalid",
            enum_simple,
            json!(4),
            false,
        ),
        (
            "enum",
            "objects are deep compared",
            enum_mixed.clone(),
            json!({"foo": false}),
            false,
        ),
        (
            "enum",
            "valid object matches",
            enum_mixed.clone(),
            json!({"foo": 12}),
            true,
        ),
        (
            "enum",
            "extra properties in object is invalid",
            enum_mixed,
            json!({"foo": 12, "boo": 42}),
            false,
        ),
        (
            "enum",
            "enum with false does not match 0",
            enum_false,
            json!(0),
            false,
        ),
        (
            "const",
            "same value is valid",
            constant.clone(),
            json!(2),
            true,
        ),
        (
            "const",
            "another value is invalid",
            constant.clone(),
            json!(5),
            false,
        ),
        (
            "const",
            "another type is invalid",
            constant,
            json!("a"),
            false,
        ),
        (
            "const",
            "same object with different property order is valid",
            const_object.clone(),
            json!({"baz": "bax", "foo": "bar"}),
            true,
        ),
        (
            "const",
            "another object is invalid",
            const_object,
            json!({"foo": "bar"}),
            false,
        ),
        (
            "properties",
            "both properties present and valid is valid",
            properties.clone(),
            json!({"foo": 1, "bar": "baz"}),
            true,
        ),
        (
            "properties",
            "one property invalid is invalid",
            properties.clone(),
            json!({"foo": 1, "bar": {}}),
            false,
        ),
        (
            "properties",
            "doesn't invalidate other properties",
            properties,
            json!({"quux": []}),
            true,
        ),
        (
            "additionalProperties",
            "no additional properties is valid",
            additional.clone(),
            json!({"foo": 1}),
            true,
        ),
        (
            "additionalProperties",
            "an additional property is invalid",
            additional.clone(),
            json!({"foo": 1, "bar": 2, "quux": "boom"}),
            false,
        ),
        (
            "additionalProperties",
            "patternProperties are not additional properties",
            additional,
            json!({"foo": 1, "vroom": 2}),
            true,
        ),
        (
            "additionalProperties",
            "an additional valid property is valid",
            additional_schema.clone(),
            json!({"foo": 1, "bar": 2, "quux": true}),
            true,
        ),
        (
            "additionalProperties",
            "an additional invalid property is invalid",
            additional_schema,
            json!({"foo": 1, "bar": 2, "quux": 12}),
            false,
        ),
        (
            "items",
            "valid items",
            items.clone(),
            json!([1, 2, 3]),
            true,
        ),
        (
            "items",
            "wrong type of items",
            items.clone(),
            json!([1, "x"]),
            false,
        ),
        (
            "items",
            "ignores non-arrays",
            items,
            json!({"foo": "bar"}),
            true,
        ),
        (
            "items",
            "prefixItems and items false: fewer items is valid",
            prefix_items.clone(),
            json!([1, 2]),
            true,
        ),
        (
            "items",
            "prefixItems and items false: additional items are not permitted",
            prefix_items,
            json!([1, 2, 3, 4]),
            false,
        ),
        (
            "minimum",
            "boundary point is valid",
            minimum.clone(),
            json!(1.1),
            true,
        ),
        (
            "minimum",
            "below the minimum is invalid",
            minimum.clone(),
            json!(0.6),
            false,
        ),
        ("minimum", "ignores non-numbers", minimum, json!("x"), true),
        (
            "minimum",
            "boundary point with float is valid",
            minimum_signed.clone(),
            json!(-2.0),
            true,
        ),
        (
            "minimum",
            "int below the minimum is invalid",
            minimum_signed,
            json!(-3),
            false,
        ),
        (
            "maximum",
            "boundary point is valid",
            maximum.clone(),
            json!(3.0),
            true,
        ),
        (
            "maximum",
            "above the maximum is invalid",
            maximum,
            json!(3.5),
            false,
        ),
        (
            "pattern",
            "a matching pattern is valid",
            pattern.clone(),
            json!("aaa"),
            true,
        ),
        (
            "pattern",
            "a non-matching pattern is invalid",
            pattern.clone(),
            json!("abc"),
            false,
        ),
        ("pattern", "ignores integers", pattern, json!(123), true),
        (
            "pattern",
            "pattern is not anchored",
            unanchored,
            json!("xxaayy"),
            true,
        ),
    ]
}

#[test]
fn agrees_with_the_suite() {
    let wrong: Vec<String> = suite()
        .into_iter()
        .filter(|(_, _, schema, value, valid)| check(schema, value).is_ok() != *valid)
        .map(|(keyword, what, schema, value, valid)| {
            format!("{keyword}: {what}: {value} against {schema} should be {valid}")
        })
        .collect();
    assert_eq!(wrong, Vec::<String>::new());
}

#[test]
fn says_which_argument_is_wrong_and_why() {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "limit": {"type": ["integer", "null"], "minimum": 0},
            "globs": {"type": "array", "items": {"type": "string"}},
            "mode": {"$ref": "#/$defs/Mode"},
            "glob": {"type": "string", "pattern": "^[^/]"}
        },
        "required": ["path"],
        "additionalProperties": false,
        "$defs": {"Mode": {"type": "string", "enum": ["a", "b"]}}
    });
    let cases = [
        (json!({"path": "x"}), Ok(())),
        (
            json!({"path": "x", "limit": null, "globs": ["*"], "mode": "a"}),
            Ok(()),
        ),
        (
            json!({}),
            Err("arguments is missing the required field `path`"),
        ),
        (
            json!({"path": 3}),
            Err("arguments.path must be string, got integer"),
        ),
        (
            json!({"path": "x", "limit": -1}),
            Err("arguments.limit must be at least 0, got -1"),
        ),
        (
            json!({"path": "x", "limit": 1.5}),
            Err("arguments.limit must be integer or null, got number"),
        ),
        (
            json!({"path": "x", "globs": [1]}),
            Err("arguments.globs[0] must be string, got integer"),
        ),
        (
            json!({"path": "x", "mode": "c"}),
            Err(r#"arguments.mode must be one of ["a","b"]"#),
        ),
        (
            json!({"path": "x", "glob": "/etc"}),
            Err(r#"arguments.glob must match the pattern `^[^/]`, got "/etc""#),
        ),
        (
            json!({"path": "x", "pth": 1}),
            Err(
                "arguments has an unknown field `pth`; known fields: glob, globs, limit, mode, path",
            ),
        ),
        (
            json!({"limit": "2", "pth": 1}),
            Err(
                "arguments is missing the required field `path`; arguments.limit must be integer \
                 or null, got string; arguments has an unknown field `pth`; known fields: glob, \
                 globs, limit, mode, path",
            ),
        ),
    ];
    for (args, want) in cases {
        assert_eq!(check(&schema, &args), want.map_err(String::from), "{args}");
    }
}

#[test]
fn one_of_must_match_exactly_one() {
    let schema = json!({
        "type": "object",
        "properties": {"n": {"oneOf": [{"type": "integer"}, {"minimum": 2}]}}
    });
    assert_eq!(
        check(&schema, &json!({"n": 3})),
        Err(
            "arguments.n matches more than one allowed shape (shapes 1 and 2); it must match \
             exactly one"
                .into()
        )
    );
    assert_eq!(
        check(&schema, &json!({"n": 1.5})),
        Err(
            "arguments.n does not match any allowed shape: (1) arguments.n must be integer, got \
             number; (2) arguments.n must be at least 2, got 1.5"
                .into()
        )
    );
}

#[test]
fn an_optional_struct_names_the_inner_fault() {
    // What schemars writes for an `Option<Range>` field.
    let schema = json!({
        "type": "object",
        "properties": {"range": {"anyOf": [{"$ref": "#/$defs/Range"}, {"type": "null"}]}},
        "$defs": {"Range": {
            "type": "object",
            "properties": {"start": {"type": "integer"}},
            "required": ["start"]
        }}
    });
    assert_eq!(
        check(&schema, &json!({"range": {"start": "1"}})),
        Err(
            "arguments.range does not match any allowed shape: (1) arguments.range.start must \
             be integer, got string; (2) arguments.range must be null, got object"
                .into()
        )
    );
}

#[test]
fn an_older_draft_is_judged_by_its_own_rules() {
    // In draft 4 `exclusiveMinimum` is a flag on `minimum`.
    let schema = json!({
        "$schema": "http://json-schema.org/draft-04/schema#",
        "properties": {"n": {"minimum": 1, "exclusiveMinimum": true}}
    });
    assert!(check(&schema, &json!({"n": 1})).is_err());
    assert_eq!(check(&schema, &json!({"n": 2})), Ok(()));
}

#[test]
fn a_schema_reads_no_other_document() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"type": "string"}"#).unwrap();
    let schema = json!({
        "type": "object",
        "properties": {"x": {"$ref": format!("file://{}", other.display())}}
    });
    // Had the file been read, 1 would be refused as not a string. The
    // schema does not compile, so the tool judges its own arguments.
    assert_eq!(check(&schema, &json!({"x": 1})), Ok(()));
}

#[test]
fn a_schema_that_is_not_json_schema_checks_nothing() {
    let schema = json!({"type": "object", "properties": {"x": {"type": "any"}}});
    assert_eq!(check(&schema, &json!({"x": 1})), Ok(()));
}

#[test]
fn compiles_once_per_tool_and_again_when_the_schema_changes() {
    let validators = Validators::default();
    let first = json!({"type": "object", "properties": {"x": {"type": "string"}}});
    let a = validators.validator("t", &first);
    let b = validators.validator("t", &first);
    assert!(
        std::sync::Arc::ptr_eq(&a, &b),
        "the second call compiled again"
    );
    let second = json!({"type": "object", "properties": {"x": {"type": "integer"}}});
    assert_eq!(validators.validate("t", &second, &json!({"x": 1})), Ok(()));
    assert!(validators.validate("t", &first, &json!({"x": 1})).is_err());
}

#[test]
fn a_field_name_that_is_no_identifier_is_quoted() {
    let schema = json!({"properties": {"a b": {"type": "string"}}});
    assert_eq!(
        check(&schema, &json!({"a b": 1})),
        Err(r#"arguments["a b"] must be string, got integer"#.into())
    );
}

#[test]
fn an_answer_is_checked_as_json_against_its_schema() {
    use super::AnswerSchema;
    let schema = AnswerSchema::new(json!({
        "type": "object",
        "properties": {"files": {"type": "array", "items": {"type": "string"}}},
        "required": ["files"],
        "additionalProperties": false
    }))
    .expect("a schema");
    assert_eq!(
        schema.check("{\"files\": [\"a.rs\"]}"),
        Ok(json!({"files": ["a.rs"]}))
    );
    // One fenced block is read as its body.
    assert_eq!(
        schema.check("```json\n{\"files\": []}\n```"),
        Ok(json!({"files": []}))
    );
    let wrong = schema
        .check("{\"files\": [1]}")
        .expect_err("a number")
        .to_string();
    assert!(wrong.starts_with("answer.files[0]"), "{wrong}");
    let prose = schema
        .check("The files are a.rs and b.rs.")
        .expect_err("prose")
        .to_string();
    assert!(prose.starts_with("the answer is not JSON"), "{prose}");
    assert!(AnswerSchema::new(json!({"type": 7})).is_err());
}
