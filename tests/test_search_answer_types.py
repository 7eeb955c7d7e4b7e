"""Questions asking for an occupation, a birth or a wedding, whose, and the memories
that give it (engine/search/answer_types.py): the answer type hybrid search lifts."""

from __future__ import annotations

import pytest

from memchat.engine.search.answer_types import (
    AGE,
    APPOINTMENT,
    BIRTH,
    HOBBY,
    OCCUPATION,
    PET,
    RESIDENCE,
    ROUTINE,
    WEDDING,
    TypedQuestion,
    asked_about,
    states,
)

SELF = TypedQuestion()


@pytest.mark.parametrize(
    "question",
    [
        "What's my job?",
        "what is my occupation",
        "What do I do as a job?",  # "for a living", as search/idioms.py says it
        "Where do I work?",
        "my previous career",
        "occupation",
        "我是做什么工作的？",
        "我的职业是什么",
        "我以前是干哪一行的",
        "我在哪儿上班？",
        "职业",
        "我 职业",  # "王芳 职业", the user's name in the first person (search/user.py)
        "我做这行多少年了？",
        "What kind of shop do I run?",
        "What do I do for a living?",
        "what does the user do",
    ],
)
def test_a_question_about_the_users_own_work_asks_for_the_users_occupation(question) -> None:
    assert asked_about(question) == SELF


@pytest.mark.parametrize(
    ("question", "relation"),
    [
        ("What does my wife do for work?", "wife"),
        ("my brother's job", "brother"),
        ("What's my spouse's profession?", "partner"),
        ("我老公是做什么的？", "husband"),
        ("我妈退休前是干什么的", "mother"),
        ("闺蜜在哪上班", "friend"),
        ("细妹做咩工", "sister"),  # Cantonese
        # "What does X do?", the commonest way to ask it, whoever X is.
        ("What does my husband do?", "husband"),
        ("What does my older sister do?", "sister"),
        ("What did my dad do before he retired?", "father"),
        # Everyday words for a friend or a husband, and an in-law spelt with spaces:
        # not "my father" + "in law".
        ("What does my mate from school do for work?", "friend"),
        ("my buddy's job", "friend"),
        ("我先生是干什么工作的？", "husband"),
        ("my father in law job", "father-in-law"),
        ("What does my mum in law do?", "mother-in-law"),
    ],
)
def test_a_question_about_a_relatives_work_asks_for_theirs(question, relation) -> None:
    assert asked_about(question) == TypedQuestion(relation=relation)


@pytest.mark.parametrize(
    "question",
    [
        "Where do I live?",
        "What do I do on Sundays?",
        "我周末喜欢干啥？",
        "工作日谁接孩子？",  # 工作日: a weekday, not work
        "我婆婆每天下午去公园干什么？",
        # Someone of the user's the relation table does not know: not the user's own job.
        "我读书时的上铺兄弟现在干哪行？",
        "What should I do?",
        "What did we do last weekend?",
        "王强是干什么的？",  # a name: the bridge asks "我老公…" so once it knows his
    ],
)
def test_other_questions_ask_for_no_occupation_of_the_user(question) -> None:
    found = asked_about(question)
    assert found is None or found.kind is not OCCUPATION


def test_a_named_persons_job_is_theirs() -> None:
    question = asked_about("What is Ciara's job?")
    assert question == TypedQuestion(name="Ciara")
    assert states("Ciara works as a nurse in Galway", question)
    assert not states("Alice works as a nurse in Berlin", question)


@pytest.mark.parametrize(
    "memory",
    [
        "Alice works as a nurse in Berlin",
        "Sam is a freelance graphic designer",
        "User runs a small bakery in Bath",
        "Priya teaches maths at a secondary school",
        "Worked for the council for ten years before retiring",
        "张敏在华西医院的急诊科当护士。",
        "用户是一名程序员",
        "老李在市第一中学教高三数学",
        "她在一家银行做柜员",
        "用户在成都开了一家火锅店",
        # A job said by its work, or by where it is done.
        "Owen drives passenger trains for Transport for Wales",
        "User drives a taxi in Cork",
        "用户在青岛开出租车，专跑夜班",
        "Maggie works at Shannon Airport",
        "Has worked there for nineteen years",
        # A Chinese job the list lacks, by its suffix.
        "用户是冰雕师，每年冬天在哈尔滨带一个雕刻队。",
        "老张是个石匠",
    ],
)
def test_a_memory_saying_what_the_user_does_for_a_living_answers_the_users_question(memory) -> None:
    assert states(memory, SELF)


@pytest.mark.parametrize(
    "memory",
    [
        "Alice has a cat named Luna",
        "Alice bikes to work every day",
        "Alice works out at the gym on Mondays",
        "用户每天早上六点起床",
        "用户喜欢在家做饭",
        "User drives a pickup truck",  # a car of one's own
        "用户每天开车上班",
        "用户是健身房会员",  # a member, not a job
    ],
)
def test_a_memory_about_something_else_says_no_occupation(memory) -> None:
    assert not states(memory, SELF)


def test_a_relatives_job_answers_the_question_about_them_not_the_users() -> None:
    husband = "Alice's husband Mark works as an accountant"
    assert not states(husband, SELF)
    assert states(husband, TypedQuestion(relation="husband"))
    assert states(husband, TypedQuestion(relation="partner"))  # a partner is a husband or a wife
    assert not states(husband, TypedQuestion(relation="brother"))
    chinese = "张敏的丈夫刘伟是一名程序员，在一家游戏公司上班。"
    assert not states(chinese, SELF) and states(chinese, TypedQuestion(relation="husband"))


@pytest.mark.parametrize(
    ("question", "kind", "relation"),
    [
        ("When's my birthday?", BIRTH, None),
        ("When was I born?", BIRTH, None),
        ("咱哪天过生儿来着？", BIRTH, None),
        ("用户几时出世", BIRTH, None),  # Cantonese
        ("我太太的生日是哪天？", BIRTH, "wife"),
        ("Tell me when our anniversary is.", WEDDING, None),
        ("我俩啥时候领的证来着", WEDDING, None),
        ("俺跟媳妇儿啥时候领的证", WEDDING, "wife"),
        ("作息", ROUTINE, None),
        ("我一天是怎么开头的？", ROUTINE, None),
        ("what time do I roll out of bed", ROUTINE, None),
        ("When does my husband go to bed?", ROUTINE, "husband"),
        ("我有啥爱好", HOBBY, None),
        ("What do I do for fun?", HOBBY, None),
        ("我休息日爱干啥？", HOBBY, None),
        ("my dad's hobbies", HOBBY, "father"),
        ("我家在哪片儿？", RESIDENCE, None),
        ("which town's closest to my place", RESIDENCE, None),
        ("wheres my sis live these days", RESIDENCE, "sister"),
        ("Remind me when I'm seeing someone about my knee", APPOINTMENT, None),
        ("我下次拍片子是哪天", APPOINTMENT, None),
        ("when is the car booked in for maintenance", APPOINTMENT, None),  # the request stripped
        ("What age is my granddaughter?", AGE, "granddaughter"),  # "How old…", search/idioms.py
        ("我女儿今年几岁了", AGE, "daughter"),
        ("What age am I?", AGE, None),
        ("用户多大年纪", AGE, None),
        ("Do I own any pets?", PET, None),
        ("我家有宠物吗？", PET, None),
        ("同事 宠物", PET, "colleague"),
        ("pets", PET, None),
    ],
)
def test_a_question_about_a_birth_or_a_wedding_asks_for_that_event(question, kind, relation) -> None:
    assert asked_about(question) == TypedQuestion(kind, relation=relation)


def test_a_birth_or_a_wedding_is_given_in_the_words_the_question_did_not_use() -> None:
    """The models do not read a birthday as a birth, nor 领证 as 结婚: the memory
    that says it in the other words answers, and one about a relative does not."""
    birthday = asked_about("When's my birthday again?")
    assert states("Morag was born on 14 March 1978 in Maryhill.", birthday)
    assert not states("Morag's brother Gregor was born in 1975.", birthday)
    assert not states("Morag has a physiotherapy appointment on 15 December.", birthday)
    wedding = asked_about("我俩啥时候领的证来着")
    assert states("周海燕的结婚纪念日是五月二十日。", wedding)
    assert not states("周海燕的女儿下个月结婚。", wedding)
    # "我跟媳妇…": the couple's day, which a memory may say by their names.
    assert states("孙浩和林晓的结婚纪念日是5月20日。", asked_about("俺跟媳妇儿啥时候领的证"))


def test_waking_and_sleeping_answer_a_question_about_the_days_rhythm() -> None:
    """ "作息" did not find "每天早上六点起床": the models do not read a routine as a
    time of waking. A morning swim is not one; a relative's waking is theirs."""
    routine = asked_about("我的作息规律吗？")
    assert states("孙浩每天早上六点起床，七点前赶到酒店。", routine)
    assert states(
        "User wakes up at 5:30 every morning and walks the dog.", asked_about("wat time do i wake up")
    )
    assert not states("用户每天早上六点游泳。", routine)
    assert not states("用户的老公每天晚上十二点才睡觉。", routine)
    # Not a routine: what is done in the morning, or early.
    assert asked_about("what's the user's morning exercise routine?") is None
    assert asked_about("我早起去哪个海滩游泳？") is None


def test_what_someone_does_for_pleasure_answers_a_question_about_their_hobbies() -> None:
    hobby = asked_about("what does the user tinker with as a pastime")
    assert states("Maggie's hobby is restoring vintage bicycles in her garden shed.", hobby)
    assert states("Owen enjoys fly fishing on the Usk.", hobby)
    assert states("伟明周末喜欢去青城山徒步。", asked_about("我休息日爱干啥？"))
    assert states("晓梅业余喜欢唱花鼓戏，参加了社区的票友队。", asked_about("我有啥爱好"))
    # Food is a liking, not a pastime; a relative's hobby is theirs.
    assert not states("用户喜欢吃辣，最爱剁椒鱼头。", asked_about("我有啥爱好"))
    assert not states("The user's wife enjoys gardening.", hobby)


def test_where_someone_lives_answers_a_question_about_their_home() -> None:
    home = asked_about("我家在哪片儿？")
    assert states("伟明在高新区租了一套两居室。", home)
    assert states("User lives on a lifestyle block outside Motueka.", asked_about("how big is my property"))
    assert not states("用户住院三天，上周出院了。", home)  # 住院: in hospital, not a home
    assert not states("伟明的妈妈住在郫县老家。", home)  # the mother's home
    # The town someone works in, short of a memory saying where they live; not a
    # trade, nor a firm.
    assert states("Alice works as a nurse in Berlin", asked_about("Where do I live?"))
    assert states("Owen is based in Cardiff.", asked_about("Where do I live?"))
    assert not states("Alice works in marketing at Siemens.", asked_about("Where do I live?"))
    assert not states("Alice's brother works in Munich.", asked_about("Where do I live?"))


def test_an_appointment_answers_a_question_about_when_one_is_due() -> None:
    """ "我下次拍片子是哪天" did not find "…要去医大二院复查腰椎核磁共振": the models
    read a scan as no re-examination. A day of the week asked about is not an
    appointment, and a relative's appointment is theirs."""
    scan = asked_about("我下次拍片子是哪天")
    assert states("用户2027年1月10日上午要去医大二院复查腰椎核磁共振。", scan)
    assert states(
        "Morag has a physiotherapy appointment on 15 December.",
        asked_about("Remind me when I'm seeing someone about my knee"),
    )
    assert not states("用户的妈妈下周三去医院复查血糖。", scan)
    assert not states("用户每周三晚上去打羽毛球。", scan)
    assert asked_about("工作日里我哪天固定锻炼？") is None


def test_an_age_answers_a_question_about_how_old_someone_is() -> None:
    """ "How old is my granddaughter?" did not find "孙女朵朵今年七岁": an age is
    said by a number of years or by a birth, and a relative's age is theirs."""
    granddaughter = asked_about("What age is my granddaughter?")
    assert states("孙女朵朵今年七岁，卡勒姆想学几句中文，好跟她视频聊天。", granddaughter)
    assert states("Owen's granddaughter Cerys is seven years old.", granddaughter)
    assert states("Owen's granddaughter Cerys turned 7 in May.", granddaughter)
    assert not states("Callum is building a model of his old trawler.", granddaughter)
    assert not states("Owen's son Rhys is 34.", granddaughter)
    assert states("周红今年五十八岁。", asked_about("用户多大年纪"))
    # "old" and 多大 alone ask for no age: an old friend, how big a flat is.
    assert asked_about("my old school friend") is None
    assert asked_about("我家房子多大") is None


def test_an_animal_kept_answers_a_question_about_pets() -> None:
    """ "Do I own any pets?" did not find "Callum has a ginger tomcat called
    Skipper"; a neighbour's dog, which held "owns", came first."""
    pets = asked_about("Do I own any pets?")
    assert states("Callum has a ginger tomcat called Skipper who sleeps by the back door.", pets)
    assert states("Callum keeps six hens and a goat.", pets)
    assert states("周红养了一只橘猫，叫胖虎。", asked_about("我家有宠物吗？"))
    assert not states("His neighbour Morag owns a border collie named Bess.", pets)
    assert not states("Owen's best mate Huw has a beagle.", pets)
    assert not states("User had crab and prawns for tea.", pets)
    assert not states("用户是个夜猫子，常熬到两点。", asked_about("我家有宠物吗？"))
    assert states("Owen's best mate Huw has a beagle.", asked_about("Which of my friends has a pet?"))
