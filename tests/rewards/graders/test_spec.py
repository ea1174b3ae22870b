"""Reading grader specs (dict, YAML, JSON, inline, built-in), their errors, and templates."""

import json
import re

import pytest

from rlvr.errors import UserError
from rlvr.rewards.graders import MissingField, build_grader, grader_types, load_grader, load_grader_spec, render
from rlvr.rewards.graders.template import template_fields

from .conftest import grade

SPEC = {"type": "string_check", "name": "exact", "reference": "{{ item.answer }}", "operation": "eq"}


def test_yaml_json_inline_and_dict_give_the_same_spec(tmp_path):
    yaml_file = tmp_path / "grader.yaml"
    yaml_file.write_text(
        "type: string_check\nname: exact\nreference: '{{ item.answer }}'\noperation: eq\n"
    )
    json_file = tmp_path / "grader.json"
    json_file.write_text(json.dumps(SPEC))
    for source in (yaml_file, str(yaml_file), str(json_file), json.dumps(SPEC), SPEC):
        assert load_grader_spec(source, grader_types()) == SPEC


def test_builtin_names_load():
    for name in ("math", "code", "countdown", "format"):
        assert load_grader_spec(name, grader_types()) == {"type": name}
    assert grade(load_grader("format"), [r"\boxed{3}"], [{}])[0].reward == 1.0


def test_loading_returns_a_copy():
    spec = load_grader_spec(SPEC, grader_types())
    spec["name"] = "changed"
    assert SPEC["name"] == "exact"


def one_line_error(source):
    with pytest.raises(UserError) as error:
        load_grader(source)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_unknown_type_suggests_the_nearest():
    message = one_line_error({"type": "text_similarty", "reference": "x"})
    assert "grader type 'text_similarty' is unknown; did you mean 'text_similarity'?" in message
    assert all(name in message for name in grader_types())


def test_unknown_field_suggests_the_nearest():
    message = one_line_error({**SPEC, "refrence": "x"})
    assert message.startswith("grader 'exact' (string_check): unknown field 'refrence'; did you mean 'reference'?")


def test_missing_field_is_named():
    spec = {key: value for key, value in SPEC.items() if key != "operation"}
    assert "missing field 'operation'" in one_line_error(spec)


def test_bad_choice_lists_the_choices():
    message = one_line_error({**SPEC, "operation": "equals"})
    assert "field 'operation' is 'equals'" in message and "eq, ne, like, ilike" in message


def test_spec_without_type_or_not_a_mapping(tmp_path):
    assert "has no 'type'" in one_line_error({"name": "x"})
    listed = tmp_path / "list.yaml"
    listed.write_text("- type: math\n")
    assert "is a list, not a mapping" in one_line_error(str(listed))


def test_invalid_yaml_and_json(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("type: regex\npattern: [a\nflags: 1\n")
    assert one_line_error(str(broken)).startswith(f"grader spec {broken}, line 3 column 6, is not valid YAML: "
                                                  "expected ',' or ']'")
    broken_json = tmp_path / "broken.json"
    broken_json.write_text('{"type": "math",}')
    assert "is not valid JSON" in one_line_error(str(broken_json))


def test_missing_file_names_the_builtins():
    message = one_line_error("no/such/grader.yaml")
    assert "neither a file nor a grader type" in message and "math, code, countdown, format" in message


def test_empty_name_is_refused():
    assert "'name' must be a non-empty string" in one_line_error({**SPEC, "name": ""})


def test_nested_error_names_the_sub_grader():
    spec = {"type": "multi", "graders": {"acc": {"type": "math", "mode": "loose"}}, "calculate_output": "acc"}
    assert one_line_error(spec).startswith("grader 'acc': field 'mode' is 'loose'")


# templates


def test_render_substitutes_sample_and_dotted_item_fields():
    item = {"answer": "72", "n": 3, "meta": {"tags": ["a", "b"], "ok": True}, "tests": [{"input": "1 2"}]}
    text = "{{sample.output_text}}|{{ item.answer }}|{{ item.n }}|{{ item.meta.tags.1 }}|{{ item.meta.ok }}"
    assert render(text, "71", item) == "71|72|3|b|true"
    assert render("{{ item.tests.0.input }} {{ item.meta.tags }}", "", item) == '1 2 ["a", "b"]'


def test_render_is_not_recursive_and_evaluates_nothing():
    # A field value that looks like a template stays text: substitution happens once.
    assert render("{{ item.q }}", "secret", {"q": "{{ sample.output_text }}"}) == "{{ sample.output_text }}"


def test_render_missing_fields():
    with pytest.raises(MissingField, match="the row has no field 'meta.source'"):
        render("{{ item.meta.source }}", "", {"meta": {}})
    with pytest.raises(MissingField, match="'tests.3'"):
        render("{{ item.tests.3 }}", "", {"tests": [1]})


@pytest.mark.parametrize(
    "template",
    [
        "{{ item }}",
        "{{ sample.output_json }}",
        "{{ sample }}",
        "{{ other.answer }}",
        "{{ item.__class__.__mro__ }}",
        "{{ item.answer.__len__ }}",
        "{{ item.answer() }}",
        "{{ item['answer'] }}",
        "{{ __import__('os').system('x') }}",
    ],
)
def test_invalid_templates_are_refused_at_load_time(template):
    with pytest.raises(UserError, match=re.escape(f"template '{template}' is not")):
        template_fields(f"before {template} after", "grader 'g'")
    with pytest.raises(UserError):
        build_grader({**SPEC, "reference": template})
