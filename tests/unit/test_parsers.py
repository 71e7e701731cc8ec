from rlve.envs.parsers import Parser, ThinkParser, XMLParser, extract_boxed


def test_xml_parser_reads_every_field_and_the_last_match_wins():
    parser = XMLParser(["think", "move"])
    text = "<think>a</think><move>1</move> then <move> 7 </move>"
    assert parser.parse_fields(text) == {"think": "a", "move": "7"}
    assert parser.parse(text) == "7"


def test_xml_parser_alternative_tags_count_as_one_field():
    parser = XMLParser(["think", ("answer", "final")], answer_field="answer")
    assert parser.parse("<final>42</final>") == "42"
    # The later of the two alternatives wins.
    assert parser.parse("<final>1</final><answer>2</answer>") == "2"
    assert parser.parse("<answer>2</answer><final>1</final>") == "1"


def test_xml_parser_missing_field_is_none_and_not_well_formed():
    parser = XMLParser(["think", "move"])
    assert parser.parse_fields("<move>3</move>") == {"think": None, "move": "3"}
    assert not parser.is_well_formed("<move>3</move>")
    assert parser.is_well_formed("<think>x</think><move>3</move>")


def test_xml_parser_format_reward_is_the_share_of_well_formed_assistant_messages():
    parser = XMLParser(["think", "move"])
    completion = [
        {"role": "assistant", "content": "<think>a</think><move>1</move>"},
        {"role": "user", "content": "<think>ignored</think><move>1</move>"},
        {"role": "assistant", "content": "<move>2</move>"},
        {"role": "assistant", "content": "<think>b</think><move>3</move>"},
        {"role": "assistant", "content": "nothing"},
    ]
    assert parser.format_reward_func()(completion) == 2 / 4


def test_xml_parser_parse_answer_takes_the_last_assistant_message_with_an_answer():
    parser = XMLParser(["answer"])
    completion = [
        {"role": "assistant", "content": "<answer>1</answer>"},
        {"role": "user", "content": "Are you sure?"},
        {"role": "assistant", "content": "yes, I am"},
    ]
    assert parser.parse_answer(completion) == "1"


def test_xml_parser_is_linear_on_a_megabyte_of_unclosed_tags():
    parser = XMLParser(["think", "move"])
    assert parser.parse("<move>" * 200_000) is None
    assert parser.parse("<move>" * 200_000 + "5</move>") == "5"


def test_xml_parser_format_renders_fields_in_order():
    assert (
        XMLParser(["think", "move"]).format(move="4", think="t")
        == "<think>t</think>\n<move>4</move>"
    )


def test_think_parser_drops_reasoning_and_checks_shape():
    parser = ThinkParser()
    assert parser.parse("<think>hmm</think> 42 ") == "42"
    assert parser.parse("<think>never closed") is None
    assert parser.parse("plain") == "plain"
    assert parser.is_well_formed("<think>a</think>answer")
    assert not parser.is_well_formed("answer<think>a</think>")
    assert not parser.is_well_formed("<think>a</think><think>b</think>x")
    assert not parser.is_well_formed("<think>a</think>   ")


def test_think_parser_with_boxed_extraction():
    parser = ThinkParser(extract=extract_boxed)
    assert parser.parse("<think>2+2</think> so \\boxed{4}") == "4"
    assert extract_boxed("\\boxed{\\frac{1}{2}} and \\boxed{{3}}") == "{3}"
    assert extract_boxed("\\boxed{unclosed") is None


def test_identity_parser():
    assert Parser().parse_answer([{"role": "assistant", "content": " hi "}]) == "hi"
    assert Parser().parse_answer("text") == "text"
