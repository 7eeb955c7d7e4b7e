"""Who "my sister" / "我对象" is: the name read beside the relation in the
user's memories (memchat/engine/search/bridge.py). The search through every
backend is in tests/conformance/test_semantic_search.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memchat.engine.model import Entry, Memory
from memchat.engine.search.bridge import bridge, merge, names_the_user, relation_in, relation_of
from memchat.engine.search.tokens import build_search_tokens

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def held(*texts: str) -> list[Entry]:
    return [Entry(f"m{i}", "app", "user", Memory(text), NOW, NOW) for i, text in enumerate(texts)]


@pytest.mark.parametrize(
    ("query", "relation"),
    [
        ("How many dogs does my sister have?", "sister"),
        ("What does my older brother do?", "brother"),
        ("Where do my parents' friends live?", None),  # not one person the user names
        ("我对象是哪个季节出生的？", "partner"),
        ("我的老公喜欢什么？", "husband"),
        ("我妈住在哪里？", "mother"),
        ("What does Alice's sister do?", None),  # not the user's
        ("What is my job?", None),
        ("我们公司在哪？", None),
        # The user is the one the memories are about: "the user's" is "my".
        ("Which medicine is the user's partner on?", "partner"),
        ("user's wife job", "wife"),
        ("用户的女儿是做什么的？", "daughter"),
        # A short "…的" may stand between; a relation before it is the user's own.
        ("我最亲近的闺蜜是谁？", "friend"),
        ("我朋友的妈妈住哪？", "friend"),
        # Colloquial words, other first persons, "me and my …".
        ("wheres my sis live", "sister"),
        ("When was my hubby born?", "husband"),
        ("What does my sibling do for a living?", "sibling"),
        ("Which days does my kid go to nursery?", "child"),
        ("俺跟媳妇儿啥时候领的证来着", "wife"),
        ("我和老公去年去了哪里？", "husband"),
        ("提醒我闺女哪天出生", "daughter"),
        ("咱妈今年多大了？", "mother"),
        # The wider family, by the one word for each relative.
        ("Where does my mother-in-law live?", "mother-in-law"),
        ("我婆婆喜欢什么？", "mother-in-law"),
        ("我儿媳妇在哪上班？", "daughter-in-law"),
        ("What do my grandkids like?", "grandchild"),
        ("我表姐住在哪", "cousin"),
        # A relation no one else owns, in a question naming no one, is the user's:
        # search-style queries, "our", "the", Scots "ma", "of mine"; Chinese leaves
        # out "my".
        ("spouse job", "partner"),
        ("big bro job", "brother"),
        ("late father occupation", "father"),
        ("when's the grandkid due", "grandchild"),
        ("what does ma wee sis do fur work", "sister"),
        ("When is our daughter's recital?", "daughter"),
        ("Which colleague of mine handles the wiring?", "colleague"),
        ("老伴 血糖 怎么治", "partner"),
        ("女婿 干啥的", "son-in-law"),
        ("我家小妹是干哪一行的？", "sister"),
        ("我每周几跟孙子视频？", "grandson"),
        # Someone else's, any of several, or a word holding the relation's inside it.
        ("Remind me which day Declan's mam calls", None),
        ("Whose mum can't be around cats?", None),
        ("Which coworker has a pet?", None),
        ("How many kids do I have?", None),
        ("When did Melanie take the kids to the museum?", None),
        ("the sister of the bride", None),
        ("店里的小妹几点走", None),
        ("我家毛孩子叫什么？", None),
        ("女儿红多少钱一瓶", None),
        ("乐乐的妈妈在哪上班", None),
        # Words of one region or another for a relative.
        ("我婆娘每天晚上去哪？", "wife"),
        ("我家老头子爱吃啥", "husband"),
        ("兄长年轻时干啥营生？", "brother"),
        ("我幺妹儿做啥买卖？", "sister"),
        ("我妹办喜事是哪天", "sister"),
        ("我哥们的店在哪", "friend"),  # a buddy, not a brother
        ("What does my mate from uni do?", "friend"),
        ("Where does my bestie live?", "friend"),
        ("我发小在哪上班？", "friend"),
        ("我先生喜欢吃什么？", "husband"),
        ("王先生住哪？", None),  # a Mr, not a husband
        # A compound spelt with spaces is the one relative, not its first word.
        ("Where does my mother in law live?", "mother-in-law"),
        ("my brother in law's car", "brother-in-law"),
        ("Who picks up my little one?", "child"),
        ("what does my boy do for work these days", "son"),
        ("my girl's school", "daughter"),
        ("my boyfriend's job", "husband"),  # not "my boy"
        ("我娘现在跟谁过", "mother"),
        ("我爹以前干啥的", "father"),
        # "the child's dad": the husband, not the child.
        ("孩子他爸在哪上班？", "husband"),
        ("我家孩子他妈喜欢吃啥", "wife"),
        # Cantonese.
        ("细妹做咩工", "sister"),
        ("我老豆几时退休", "father"),
        ("我家婆住边度", "mother-in-law"),
        # A neighbour is someone the user names by relation too.
        ("What's my neighbour's dog called?", "neighbour"),
        ("我邻居在哪上班", "neighbour"),
    ],
)
def test_only_a_first_person_relation_asks_who(query, relation) -> None:
    found = relation_in(query)
    assert (found[0] if found else None) == relation


@pytest.mark.parametrize(
    "memory",
    [
        "Emma, Alice's sister, teaches in Leeds.",
        "Alice and her sister Emma hiked in Wales.",
        "User's sister is called Emma",
        "Emma is my sister.",
    ],
)
def test_the_name_is_the_relation_s_not_its_owner_s(memory) -> None:
    found = bridge("How many dogs does my sister have?", held(memory))
    assert found is not None and found.query == "How many dogs does Emma have?"


def test_a_chinese_name_before_de_owns_the_relation() -> None:
    assert bridge("我妈妈身体怎么样？", held("周海燕的妈妈住在绍兴，患有糖尿病。")) is None
    found = bridge("我妈妈身体怎么样？", held("周海燕的妈妈王秀英住在绍兴。"))
    assert found is not None and found.name == "王秀英"


def test_a_gendered_question_does_not_take_the_other_gender() -> None:
    memories = held("Alice lives with her husband Tom.", "Alice's partner Sam plays chess.")
    assert bridge("What does my wife like?", memories).name == "Sam"  # a partner may be a wife
    assert bridge("What does my partner like?", memories).name == "Tom"  # the better holder first
    assert bridge("What does my wife like?", held("Alice lives with her husband Tom.")) is None


def test_a_sibling_or_a_child_is_a_brother_or_a_sister_a_son_or_a_daughter() -> None:
    memories = held("Owen's older brother Gareth runs a pub in Swansea.")
    assert bridge("What does my sibling do for a living?", memories).name == "Gareth"
    assert bridge("What does my sister do for a living?", memories) is None
    daughter = held("Alice's daughter Mia goes to nursery.")
    assert bridge("Which days does my kid go to nursery?", daughter).name == "Mia"
    assert bridge("Which days does my son go to nursery?", daughter) is None


def test_a_job_title_or_a_place_is_not_taken_for_a_person() -> None:
    assert bridge("What does my boss think?", held("Alice is a project manager at Siemens.")) is None
    assert bridge("Who is my friend?", held("Alice has a friend in Berlin.")) is None


def test_the_most_named_person_in_the_question_s_language_wins() -> None:
    memories = held("Sam's wife Priya plays the viola.", "我和老公王磊住在杭州。", "王磊是我爱人。")
    assert bridge("我爱人平时做什么运动？", memories).query == "王磊 平时做什么运动？"
    assert bridge("What does my partner play?", memories).name == "Priya"


def test_a_chinese_name_stands_apart_in_the_question_asked_again() -> None:
    """jieba glues a name to the next word ("陈可学什么" gives 陈可学): set off by spaces,
    the name is a word of the question asked again."""
    found = bridge("我女儿学什么专业？", held("周海燕的女儿陈可在上海读大学。"))
    assert found is not None and found.query == "陈可 学什么专业？"
    assert "陈可" in build_search_tokens(found.query)


def test_a_chinese_name_of_prefix_and_surname_is_a_name() -> None:
    """jieba cuts 老陈 into 老 + 陈; the name is both."""
    memories = held("周海燕的丈夫老陈对花粉过敏。", "周海燕的好朋友小刘在银行上班。")
    assert bridge("告诉我老公是干什么的", memories).query == "告诉 老陈 是干什么的"
    assert bridge("我最亲近的闺蜜是谁？", memories).name == "小刘"


def test_a_list_after_a_plural_relation_asks_about_each_name() -> None:
    """Which of "two children, Ciara and Fionn" is the daughter the words do not say:
    the question is asked about each."""
    children = "Nora and Declan have two children, Ciara and Fionn."
    found = bridge("What's my daughter's job?", held(children))
    assert found is not None and found.names == ("Ciara", "Fionn")
    assert found.queries == ("What's Ciara's job?", "What's Fionn's job?")
    sisters = bridge("Where does my sister live?", held("Nora has two sisters, Bríd and Maeve."))
    assert sisters is not None and sisters.names == ("Bríd", "Maeve")
    # One person the relation names wins over a list; a list of one is that one.
    both = held(children, "Nora's daughter Ciara lives in Melbourne.")
    assert bridge("What's my daughter's job?", both).names == ("Ciara",)
    chinese = bridge("我女儿在哪上学？", held("周海燕有两个孩子，陈浩和陈可。"))
    assert chinese is not None and chinese.queries == ("陈浩 在哪上学？", "陈可 在哪上学？")
    three = bridge("我儿子做什么工作？", held("老王有三个孩子，王刚、王芳和王丽。"))
    assert three is not None and three.names == ("王刚", "王芳", "王丽")
    assert bridge("我女儿在哪上学？", held("周海燕的女儿陈可在上海读大二。")).names == ("陈可",)
    one_son = held("Nora has two sons, Fionn and a baby girl.")
    assert bridge("What's my son's job?", one_son).names == ("Fionn",)


def test_the_wider_family_is_named_too() -> None:
    in_law = held("Nora's mother-in-law Maureen rings every Sunday evening.", "Nora's mother Peggy is 91.")
    assert bridge("Which day does my mother-in-law call?", in_law).name == "Maureen"
    assert bridge("How old is my mother?", in_law).name == "Peggy"  # not the mother-in-law
    spaced = held("Nora's mother in law Maureen rings every Sunday evening.", "Nora's mother Peggy is 91.")
    assert bridge("Which day does my mother in law call?", spaced).name == "Maureen"
    assert bridge("How old is my mother?", spaced).name == "Peggy"
    assert bridge("我婆婆喜欢什么？", held("周海燕的婆婆王秀英住在苏州。")).name == "王秀英"
    grandchildren = held("Nora has three grandchildren, Oisín, Aoife and Cian.")
    assert bridge("What does my granddaughter like?", grandchildren).names == ("Oisín", "Aoife", "Cian")


def test_a_neighbour_is_named_like_a_relative() -> None:
    """ "His neighbour Morag Campbell owns a border collie": the dog is Morag's, and
    "my neighbour" is Morag."""
    neighbour = held("His neighbour Morag Campbell owns a border collie named Bess.")
    assert bridge("What breed is my neighbour's dog?", neighbour).name == "Morag"


def test_merging_keeps_each_memory_at_its_better_score() -> None:
    a, b, c = held("one", "two", "three")
    merged = merge([a.with_score(0.5), b.with_score(0.4)], [b.with_score(0.9), c.with_score(0.3)], limit=2)
    assert [(e.id, e.score) for e in merged] == [("m1", 0.9), ("m0", 0.5)]


def test_an_english_question_does_not_load_the_chinese_dictionary() -> None:
    """Loading jieba takes a second in the calling thread (the event loop, when the
    extraction searches): an English relation question must not need it unless a
    Chinese memory holds the relation's word (then it loads in a thread)."""
    import subprocess
    import sys

    probe = """
import asyncio, sys
from backends import create
from memchat.engine import MemoryService, SearchOptions, UserKey

async def main():
    svc = MemoryService(create("inmemory"), embedder=False)
    key = UserKey("app", "user")
    await svc.add(key, "Alice lives with her wife Priya")
    await svc.add(key, "Priya plays the viola")
    hits = await svc.search(key, "What instrument does my wife play?", SearchOptions(mode="keyword"))
    print("viola" in " ".join(h.memory.text for h in hits), "jieba" in sys.modules)
    # No memory names a daughter, in English or in Chinese: nothing to segment either.
    await svc.search(key, "How old is my daughter?", SearchOptions(mode="keyword"))
    print("jieba" in sys.modules)

asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "False", "False"], done.stderr


async def test_a_bridged_search_that_fails_stops_its_other_half(monkeypatch) -> None:
    """The question as asked and the question about the person run together: when
    one fails, the caller gets that error and the other is not left running."""
    import asyncio

    from backends import create
    from memchat.engine import NO_EMBEDDER, MemoryService, UserKey
    from memchat.engine.model import BackendError

    svc = MemoryService(create("inmemory"), embedder=NO_EMBEDDER)
    await svc.open()
    asked = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow_ranked(*args, **kwargs):
        asked.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return []

    async def failing_holders(*args, **kwargs):
        await asked.wait()
        raise BackendError("the memory store stopped answering")

    monkeypatch.setattr(svc, "_ranked", slow_ranked)
    monkeypatch.setattr(svc, "_holders", failing_holders)
    with pytest.raises(BackendError, match="stopped answering"):
        await asyncio.wait_for(svc.search(UserKey("app", "user"), "How many dogs does my sister have?"), 5)
    assert cancelled.is_set()
    await svc.close()


@pytest.mark.parametrize(
    ("memories", "question", "answer"),
    [
        # A Chinese speaker's memories may be in English: "用户的女儿" is looked up
        # with "daughter" too, and the question asked again about Hannah.
        (
            [
                "Eleanor's daughter Hannah keeps two rabbits in Leeds.",
                "Hannah works as a paramedic.",
                "Eleanor runs a sheep farm.",
            ],
            "用户的女儿是做什么的？",
            "Hannah works as a paramedic.",
        ),
        # A bilingual user's husband may be named only in Chinese: when no English
        # memory names him, "my husband" is looked up with 老公, 丈夫… too.
        (
            ["我和老公王磊住在杭州。", "王磊每天早上跑步五公里。", "Sam lives in Leeds with his wife Priya."],
            "How does my husband keep fit?",
            "王磊每天早上跑步五公里。",
        ),
    ],
)
async def test_a_question_finds_the_person_named_in_the_other_language(memories, question, answer) -> None:
    from backends import create
    from memchat.engine import NO_EMBEDDER, MemoryService, SearchOptions, UserKey

    svc = MemoryService(create("inmemory"), embedder=NO_EMBEDDER)
    key = UserKey("app", "user")
    for text in memories:
        await svc.add(key, text)
    found = await svc.search(key, question, SearchOptions(mode="keyword"))
    assert answer in [e.memory.text for e in found]
    await svc.close()


def test_the_relation_a_named_person_has_to_the_user_is_read_from_the_memories() -> None:
    holders = held(
        "Nora and Declan married on 2 August 1980.",
        "Declan's mother Maureen rings on Sundays.",
        "Nora's husband Declan is a retired harbour pilot.",
        "我和老公老陈住在杭州。",
    )
    firsts = ("husband", "wife", "mother", "father")
    assert relation_of("Declan", holders, firsts) == "husband"
    assert relation_of("Nora", holders, firsts) is None  # the owner of the relation, not it
    assert relation_of("老陈", holders, firsts) == "husband"
    assert relation_of("Declan", holders, ("son", "daughter")) is None


LAO_LIU = held(
    "刘晓燕的丈夫陈磊是交警，在南岗区上班。",
    "老刘的老伴叫李淑芬，退休前是亚麻厂的挡车工。",
    "老刘和老伴打算十二月底去三亚过冬。",
    "老刘的女儿刘晓燕在小学教语文。",
)


def test_a_given_name_jieba_tags_as_foreign_is_still_a_name() -> None:
    """jieba tags 李淑芬 as 李 (nr) + 淑芬 (nrt): one name all the same."""
    found = bridge("我老伴平时有啥爱好？", LAO_LIU[1:2])
    assert found is not None and found.name == "李淑芬"


def test_a_name_joined_to_the_relation_by_he_is_its_companion() -> None:
    """ "老刘和老伴" is 老刘 and his wife: 老刘 is not the 老伴."""
    assert bridge("我老伴平时有啥爱好？", LAO_LIU[2:3]) is None


def test_another_person_s_relative_is_not_the_user_s() -> None:
    """The daughter's husband (刘晓燕的丈夫陈磊) is no answer to "我爱人" when the
    memories are about 老刘: the person most of them name, who is no one's relative."""
    found = bridge("我爱人的姓名", LAO_LIU)
    assert found is not None and found.names == ("李淑芬",)
    english = held(
        "Ciara's husband Tom is a fisherman.",
        "Nora's husband Declan is a retired harbour pilot.",
        "Nora and her husband Declan married in 1980.",
    )
    found = bridge("What does my husband do?", english)
    assert found is not None and found.names == ("Declan",)
    assert relation_of("Tom", english, ("husband", "son")) is None
    # Without a person who stands out (Nora named once, as Ciara), both count: the
    # better holder's name is taken.
    assert bridge("What does my husband do?", english[:2]).names == ("Tom",)


def test_a_given_name_jieba_reads_as_a_place_or_a_proper_noun_is_still_a_name() -> None:
    """jieba cuts 周建华 into 周 (nr) + 建华 (nz), and keeps 老周 whole as a time (t)."""
    found = bridge("我哥哥年轻时干什么？", held("用户的哥哥周建华住在重庆，以前在长江上开船。"))
    assert found is not None and found.name == "周建华"
    found = bridge("我老伴喜欢啥？", held("老周的老伴刘秀英退休前是会计。", "老周每天下午打麻将。"))
    assert found is not None and found.name == "刘秀英"


def test_a_name_acting_on_the_relative_is_not_the_relative() -> None:
    """In "周建国答应女婿…" 周建国 promises his son-in-law something: he is not him;
    "陈浩是我女婿" names him."""
    assert bridge("我女婿干啥的？", held("周建国答应女婿，12月20号下午去开家长会。")) is None
    found = bridge("我女婿干啥的？", held("陈浩是我女婿，在成都开出租车。"))
    assert found is not None and found.name == "陈浩"


def test_the_user_is_not_their_own_relative() -> None:
    """The person most of the memories name, who is no one's relative, is the user:
    never the answer to "my son-in-law"."""
    memories = held(
        "周建国在青羊区开了一家五金店。",
        "周建国答应女婿陈浩，下午去开家长会。",
        "周建国喜欢听川剧。",
    )
    found = bridge("我女婿干啥的？", memories)
    assert found is not None and found.names == ("陈浩",)


def test_a_given_name_jieba_reads_as_another_word_names_the_relative_before_it() -> None:
    """jieba tags 浩然 an adjective: "儿子浩然读初二" still names the son, who does
    something; "儿子聪明得很" names no one."""
    found = bridge("我儿子有什么忌口？", held("儿子浩然读初二，在厦门双十中学。", "儿子周末在少年宫学围棋。"))
    assert found is not None and found.names == ("浩然",)
    assert bridge("我儿子有什么忌口？", held("儿子聪明得很。", "儿子周末在少年宫学围棋。")) is None


def test_the_user_s_name_is_the_most_named_person_who_is_no_one_s_relative() -> None:
    """王芳 is the person of "王芳的妹妹王静…"; in memories in the first person
    ("我和老公老陈…") the most named, 老陈, is the husband."""
    assert names_the_user("王芳", held("王芳不吃香菜。", "王芳的妹妹王静在上海当律师。", "王芳喜欢烘焙。"))
    first_person = held("我和老公老陈住在杭州。", "老陈是一名出租车司机。", "老陈每个周末都去钓鱼。")
    assert not names_the_user("老陈", first_person)
    # The memories call her 陈丽华 once and 丽华 after: one person.
    by_given_name = held(
        "陈丽华在厦门开了一家茶叶店。", "丽华开一辆白色本田。", "丽华的闺蜜阿芳在鼓浪屿开民宿。"
    )
    assert not names_the_user("陈丽华", by_given_name)
    assert names_the_user("陈丽华", by_given_name, ("丽华",))
