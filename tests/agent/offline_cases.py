"""What the offline model must do with common English and Chinese messages:
each case is a message and the tool calls it must lead to in that turn (the
tool's name and a fragment of its main argument: the memory for add/update,
the query for search), in order, over every round of the turn.

Questions run against a stored profile (PROFILE_EN / PROFILE_ZH) and name
what the answer must and must not contain: a question about one topic is
answered with that topic, not with everything remembered. Changes ("I don't
work at a bakery anymore, I work at a library now") run against the memories
in ``setup`` and name what must be stored after the turn and what must be
gone.

``held_out`` cases were written before the rules they exercise and never used
to tune them; tests/agent/test_offline_cases.py reports how many of them pass
rather than requiring all.
"""

from __future__ import annotations

from dataclasses import dataclass

Call = tuple[str, str]


@dataclass(frozen=True)
class Case:
    text: str
    calls: tuple[Call, ...]
    #: Memories stored before the message.
    setup: tuple[str, ...] = ()
    #: Fragments the answer must contain / must not contain.
    recalls: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    #: Fragments some stored memory must contain after the turn / no memory may contain.
    stored: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()
    held_out: bool = False

    @property
    def chinese(self) -> bool:
        return any("\u4e00" <= ch <= "\u9fff" for ch in self.text)


PROFILE_EN = (
    "User's name is Ana",
    "User works at a hospital as a nurse",
    "User lives in Lisbon",
    "User is allergic to peanuts",
    "User is vegetarian",
    "User plays the cello",
    "User has a dog named Rex",
    "User likes jazz",
    "User's sister is called Marta",
    "User was born in 1990",
    "User speaks Portuguese and English",
    "User drives a Tesla",
)
PROFILE_ZH = (
    "用户名叫小林",
    "用户在医院工作",
    "用户住在杭州",
    "用户对花生过敏",
    "用户是素食者",
    "用户会弹钢琴",
    "用户养了一只猫",
    "用户喜欢爵士乐",
    "用户的生日是五月三号",
    "用户会说日语",
)


def say(text: str, *memories: str, held_out: bool = False) -> Case:
    """A statement: one memory_add per fragment, in order."""
    return Case(text, tuple(("memory_add", m) for m in memories), held_out=held_out)


def nothing(text: str, held_out: bool = False) -> Case:
    """Not about the user (or not durable): no tool call."""
    return Case(text, (), held_out=held_out)


def ask(
    text: str,
    query: str,
    recalls: tuple[str, ...] = (),
    excludes: tuple[str, ...] = (),
    held_out: bool = False,
) -> Case:
    """A question about one topic: memory_search with that topic, answered from the profile."""
    profile = PROFILE_ZH if any("\u4e00" <= ch <= "\u9fff" for ch in text) else PROFILE_EN
    return Case(text, (("memory_search", query),), profile, recalls, excludes, held_out=held_out)


def load(text: str, held_out: bool = False) -> Case:
    """A question about everything: memory_load."""
    profile = PROFILE_ZH if any("\u4e00" <= ch <= "\u9fff" for ch in text) else PROFILE_EN
    return Case(text, (("memory_load", ""),), profile, held_out=held_out)


def change(
    text: str, old: str, search: str, new: str, gone: str, held_out: bool = False, stored: str = ""
) -> Case:
    """A change of a stored fact: search for it, then memory_update it to ``new``."""
    return Case(
        text,
        (("memory_search", search), ("memory_update", new)),
        setup=(old,),
        stored=(stored or new,),
        gone=(gone,),
        held_out=held_out,
    )


def forget(text: str, old: str, search: str, held_out: bool = False) -> Case:
    return Case(
        text, (("memory_search", search), ("memory_delete", "")), setup=(old,), gone=(old,), held_out=held_out
    )


# -- English -------------------------------------------------------------------------

ENGLISH = [
    # health and diet
    say("I'm allergic to peanuts", "User is allergic to peanuts"),
    say("I am allergic to cats and dust", "User is allergic to cats and dust"),
    say("I have a peanut allergy", "User has a peanut allergy"),
    say("I'm lactose intolerant", "User is lactose intolerant"),
    say("I'm vegetarian", "User is vegetarian"),
    say("I am vegan", "User is vegan"),
    say("I'm a vegetarian", "User is a vegetarian"),
    say("I don't eat meat", "User doesn't eat meat"),
    say("I don't drink alcohol", "User doesn't drink alcohol"),
    say("I can't eat gluten", "User can't eat gluten"),
    say("I'm diabetic", "User is diabetic"),
    say("I'm vegetarian and I play the cello", "User is vegetarian", "User plays the cello"),
    # instruments, sports, hobbies
    say("I play the cello", "User plays the cello"),
    say("I play the guitar and I sing in a choir", "User plays the guitar", "User sings in a choir"),
    say("I play tennis on weekends", "User plays tennis on weekends"),
    say("I practice yoga every morning", "User practices yoga every morning"),
    say("I go hiking every Sunday", "User goes hiking every Sunday"),
    say("I collect stamps", "User collects stamps"),
    say("I usually run 5k before work", "User usually runs 5k before work"),
    say("I watch a lot of anime", "User watches a lot of anime"),
    say("I speak Spanish and French", "User speaks Spanish and French"),
    say("I'm learning Japanese", "User is learning Japanese"),
    say("I'm learning to play the piano", "User is learning to play the piano"),
    say("I knit in my free time", "User knits in their free time"),
    say("I drink my coffee black", "User drinks their coffee black"),
    say("I drive a Volvo", "User drives a Volvo"),
    say("I ride my bike to work", "User rides their bike to work"),
    say("My hobby is photography", "User's hobby is photography"),
    say("My hobbies are chess and climbing", "User's hobbies are chess and climbing"),
    # likes and dislikes
    say("I like Go", "User likes Go"),
    say("I love sushi", "User likes sushi"),
    say("I really enjoy hiking", "User likes hiking"),
    say("I hate cilantro", "User dislikes cilantro"),
    say("I don't like horror movies", "User dislikes horror movies"),
    say("I prefer tea over coffee", "User prefers tea over coffee"),
    say("My favorite color is green", "User's favorite color is green"),
    say("My favourite band is Radiohead", "User's favorite band is Radiohead"),
    # identity, place, work, family
    say("My name is Ana", "User's name is Ana"),
    say("Call me Bob", "User's name is Bob"),
    say("I'm Zhang San and I like Go", "User's name is Zhang San", "Zhang San likes Go"),
    say("I live in Berlin", "User lives in Berlin"),
    say("I'm from Brazil", "User is from Brazil"),
    say("I grew up in Texas", "User grew up in Texas"),
    say("I work at ACME", "User works at ACME"),
    say("I work as a nurse", "User works as a nurse"),
    say("I'm a software engineer", "User is a software engineer"),
    say("I'm a teacher at a primary school", "User is a teacher at a primary school"),
    say("I study medicine at Oxford", "User studies medicine at Oxford"),
    say("I have two kids", "User has two kids"),
    say("I have a cat named Tom", "User has a cat named Tom"),
    say("My sister is called Ana", "User's sister is called Ana"),
    say("My wife's name is Julia", "User's wife's name is Julia"),
    say("I'm married", "User is married"),
    say("I'm 34 years old", "User is 34 years old"),
    say("I was born in 1990", "User was born in 1990"),
    say("My birthday is on May 3rd", "User's birthday is on May 3rd"),
    say("I'm left-handed", "User is left-handed"),
    say("Remember that my sister is called Ana", "User's sister is called Ana"),
    say("Please remember that I park on level 3", "User parks on level 3"),
    say(
        "Hi! I'm Maria, I live in Madrid and I love flamenco",
        "User's name is Maria",
        "Maria lives in Madrid",
        "Maria likes flamenco",
    ),
    # a person named by relation: the search finds who that is (engine/search/bridge.py)
    Case(
        "How many pets does my sister have?",
        (("memory_search", "my sister"),),
        (*PROFILE_EN, "Marta has two cats and a parrot"),
        recalls=("two cats",),
    ),
    # questions about one topic
    ask("What's my job?", "job", ("nurse",), ("Lisbon", "cello", "Tesla")),
    ask("What is my job?", "job", ("nurse",), ("Lisbon", "cello")),
    ask("Where do I work?", "work", ("hospital",), ("cello", "jazz")),
    ask("What do I do for a living?", "living", ("nurse",), ("cello", "jazz")),
    ask("Where do I live?", "live", ("Lisbon",), ("cello", "peanuts")),
    ask("What am I allergic to?", "allergic", ("peanuts",), ("Lisbon", "cello")),
    ask("Do I have any allergies?", "allerg", ("peanuts",), ("Lisbon", "cello")),
    ask("What instrument do I play?", "instrument", ("cello",), ("Lisbon", "peanuts")),
    ask("Do I have pets?", "pet", ("Rex",), ("Lisbon", "cello")),
    ask("What's my dog's name?", "dog", ("Rex",), ("Lisbon", "cello")),
    # Elliptical questions: in a chat about the user, "any pets?" asks about the user's.
    ask("any pets?", "pets", ("Rex",), ("Lisbon", "cello")),
    ask("Any allergies?", "allergies", ("peanuts",), ("Lisbon", "cello")),
    ask("What music do I like?", "music", ("jazz",), ("Lisbon", "peanuts")),
    ask("What's my sister's name?", "sister", ("Marta",), ("Lisbon", "cello")),
    ask("When was I born?", "born", ("1990",), ("Lisbon", "cello")),
    ask("What languages do I speak?", "language", ("Portuguese",), ("cello", "peanuts")),
    ask("What car do I drive?", "car", ("Tesla",), ("cello", "peanuts")),
    ask("What's my name?", "name", ("Ana",), ("Lisbon", "peanuts")),
    ask("Am I vegetarian?", "vegetarian", ("vegetarian",), ("Lisbon", "cello")),
    ask("What's my diet?", "diet", ("vegetarian",), ("Lisbon", "cello")),
    ask("Do you remember where I live?", "live", ("Lisbon",), ("cello",)),
    ask("Remind me what my sister is called", "sister", ("Marta",), ("cello",)),
    load("What do you know about me?"),
    load("Who am I?"),
    load("Show what you remember about me"),
    # changes: update the old memory, or say it no longer holds
    change(
        "I don't work at a bakery anymore, I work at a library now",
        "User works at a bakery",
        "work",
        "User works at a library",
        "bakery",
    ),
    change("I moved to Munich", "User lives in Berlin", "live", "User lives in Munich", "Berlin"),
    change(
        "I used to live in Paris, now I live in Rome",
        "User lives in Paris",
        "live",
        "User lives in Rome",
        "Paris",
    ),
    change(
        "I no longer play tennis",
        "User plays tennis",
        "tennis",
        "User no longer plays tennis",
        "User plays tennis",
    ),
    change(
        "I'm not vegetarian anymore",
        "User is vegetarian",
        "vegetarian",
        "User is no longer vegetarian",
        "User is vegetarian",
    ),
    change(
        "I quit my job at Google and now I work at Apple",
        "User works at Google",
        "work",
        "User works at Apple",
        "Google",
    ),
    Case(
        "I don't work at a bakery anymore, I work at a library now",
        (("memory_search", "work"), ("memory_add", "User works at a library")),
        stored=("User works at a library",),
    ),
    # forgetting
    forget("Forget that I live in Berlin", "User lives in Berlin", "Berlin"),
    forget("please delete the memory about my cat", "User has a cat named Tom", "cat"),
    Case("Forget everything", (("memory_clear", ""),), setup=("User lives in Berlin",), gone=("Berlin",)),
    # nothing to remember or look up
    nothing("How is the weather today?"),
    nothing("Explain quantum computing"),
    nothing("hello"),
    nothing("Thanks!"),
    nothing("I'm tired"),
    nothing("I'm fine, thanks"),
    nothing("Can you help me write an email?"),
    nothing("I think so"),
    nothing("What time is it?"),
    nothing("Any ideas for dinner tonight?"),
    nothing("any news?"),
    nothing("I'm not sure"),
    nothing("I don't know, I think so"),
    nothing("I have a question"),
    nothing("I want to learn Rust"),
    # held out: written before the rules, never tuned on
    say("I'm allergic to shellfish", "User is allergic to shellfish", held_out=True),
    say("I'm pescatarian", "User is pescatarian", held_out=True),
    say("I play the violin in an orchestra", "User plays the violin in an orchestra", held_out=True),
    say("I go swimming twice a week", "User goes swimming twice a week", held_out=True),
    say("I'm a huge fan of Arsenal", "User is a huge fan of Arsenal", held_out=True),
    say("I work for a startup in Lisbon", "User works for a startup in Lisbon", held_out=True),
    say("I'm keto and I do CrossFit", "User is keto", "User does CrossFit", held_out=True),
    say("My dog is called Biscuit", "User's dog is called Biscuit", held_out=True),
    say("I have three brothers", "User has three brothers", held_out=True),
    say("I'm gluten intolerant", "User is gluten intolerant", held_out=True),
    ask("What sports do I play?", "sport", (), ("Lisbon", "peanuts"), held_out=True),
    ask("Which city do I live in?", "city", ("Lisbon",), ("cello",), held_out=True),
    ask("What food am I allergic to?", "allergic", ("peanuts",), ("cello",), held_out=True),
    ask("What's my profession?", "profession", ("nurse",), ("cello",), held_out=True),
    ask("Do I have a sister?", "sister", ("Marta",), ("cello",), held_out=True),
    change(
        "I don't live in Berlin anymore, I live in Hamburg now",
        "User lives in Berlin",
        "live",
        "User lives in Hamburg",
        "Berlin",
        held_out=True,
    ),
    change(
        "I stopped playing the piano",
        "User plays the piano",
        "piano",
        "piano",
        "User plays the piano",
        held_out=True,
    ),
    change(
        "I switched jobs, I work at Spotify now",
        "User works at Google",
        "work",
        "User works at Spotify",
        "Google",
        held_out=True,
    ),
    nothing("Tell me a joke", held_out=True),
    nothing("I'm going to the store", held_out=True),
]

# -- Chinese -------------------------------------------------------------------------

CHINESE = [
    Case(
        "我对象是做什么工作的？",
        (("memory_search", "我对象"),),
        (*PROFILE_ZH, "用户的女朋友叫陈静", "陈静是一名小学老师"),
        recalls=("小学老师",),
    ),
    say("我对花生过敏", "用户对花生过敏"),
    say("我对猫毛过敏", "用户对猫毛过敏"),
    say("我是素食者", "用户是素食者"),
    say("我吃素", "用户吃素"),
    say("我不吃辣", "用户不吃辣"),
    say("我不喝酒", "用户不喝酒"),
    say("我乳糖不耐受", "用户乳糖不耐受"),
    say("我会弹钢琴", "用户会弹钢琴"),
    say("我是素食者，我会拉大提琴", "用户是素食者", "用户会拉大提琴"),
    say("我每天跑步", "用户每天跑步"),
    say("我周末打网球", "用户周末打网球"),
    say("我在学日语", "用户在学日语"),
    say("我养了一只狗", "用户养了一只狗"),
    say("我喜欢爬山", "用户喜欢爬山"),
    say("我很喜欢吃火锅", "用户喜欢吃火锅"),
    say("我不喜欢香菜", "用户不喜欢香菜"),
    say("我讨厌下雨天", "用户不喜欢下雨天"),
    say("我住在北京", "用户住在北京"),
    say("我来自成都", "用户来自成都"),
    say("我在图书馆工作", "用户在图书馆工作"),
    say("我是一名医生", "用户是医生"),
    say("我是老师", "用户是老师"),
    say("我有两个孩子", "用户有两个孩子"),
    say("我的生日是五月三号", "用户的生日是五月三号"),
    say("我的妹妹叫小红", "用户的妹妹叫小红"),
    say("我叫李雷", "用户名叫李雷"),
    say("你好，我是张三，我喜欢 Go 语言编程", "张三喜欢 Go 语言编程"),
    say("记住我的车停在三楼", "用户的车停在三楼"),
    say("我会说英语和法语", "用户会说英语和法语"),
    say("我开特斯拉", "用户开特斯拉"),
    ask("我的工作是什么？", "工作", ("医院",), ("杭州", "钢琴")),
    ask("我在哪里工作？", "工作", ("医院",), ("杭州", "钢琴")),
    ask("我住在哪里？", "住", ("杭州",), ("钢琴", "花生")),
    ask("我对什么过敏？", "过敏", ("花生",), ("杭州", "钢琴")),
    ask("我会什么乐器？", "乐器", ("钢琴",), ("杭州", "花生")),
    ask("我喜欢什么音乐？", "音乐", ("爵士",), ("杭州", "花生")),
    ask("我的生日是哪天？", "生日", ("五月三号",), ("杭州", "钢琴")),
    ask("我会说什么语言？", "语言", ("日语",), ("杭州", "花生")),
    ask("我叫什么名字？", "名字", ("小林",), ("杭州", "钢琴")),
    ask("我养了什么宠物？", "宠物", ("猫",), ("杭州", "钢琴")),
    load("你记得关于我的什么？"),
    load("我是谁？"),
    change("我不在面包店工作了，现在在图书馆工作", "用户在面包店工作", "工作", "用户在图书馆工作", "面包店"),
    change("我搬到上海了", "用户住在北京", "住", "用户住在上海", "北京"),
    change("我以前住在北京，现在住在深圳", "用户住在北京", "住", "用户住在深圳", "北京"),
    change("我不再打网球了", "用户打网球", "网球", "用户不再打网球", "用户打网球"),
    forget("忘记我住在北京", "用户住在北京", "北京"),
    nothing("今天天气怎么样？"),
    nothing("给我讲个笑话"),
    nothing("你好"),
    nothing("谢谢"),
    nothing("帮我写一封邮件"),
    # held out
    say("我对海鲜过敏", "用户对海鲜过敏", held_out=True),
    say("我会弹吉他，也会打鼓", "用户会弹吉他", "用户会打鼓", held_out=True),
    say("我是一名律师", "用户是律师", held_out=True),
    say("我每周游泳两次", "用户每周游泳两次", held_out=True),
    ask("我是做什么工作的？", "工作", ("医院",), ("钢琴",), held_out=True),
    ask("我有什么过敏吗？", "过敏", ("花生",), ("钢琴",), held_out=True),
    change("我现在不在北京住了，搬到广州了", "用户住在北京", "住", "用户住在广州", "北京", held_out=True),
    nothing("现在几点了？", held_out=True),
    say("我的爱好是摄影", "用户的爱好是摄影", held_out=True),
    ask("我的爱好是什么？", "爱好", (), ("杭州",), held_out=True),
]

# Written after the rules were frozen (a second held-out batch), run once, never tuned on.
HELD_OUT_AFTER = [
    say("I'm allergic to penicillin", "User is allergic to penicillin", held_out=True),
    say("I work night shifts at a hospital", "User works night shifts at a hospital", held_out=True),
    say("I have a daughter named Lily", "User has a daughter named Lily", held_out=True),
    say("I mostly cook Italian food", "User mostly cooks Italian food", held_out=True),
    say(
        "I'm a big fan of jazz and I play the saxophone",
        "User is a big fan of jazz",
        "User plays the saxophone",
        held_out=True,
    ),
    say("My partner is called Sam", "User's partner is called Sam", held_out=True),
    say("I don't eat pork", "User doesn't eat pork", held_out=True),
    ask("What am I allergic to again?", "allergic", ("peanuts",), ("cello",), held_out=True),
    ask("Which instrument do I play?", "instrument", ("cello",), ("Lisbon",), held_out=True),
    ask("Where am I living these days?", "living", ("Lisbon",), ("cello",), held_out=True),
    change(
        "I moved to Porto last month",
        "User lives in Lisbon",
        "live",
        "User lives in Porto",
        "Lisbon",
        held_out=True,
    ),
    nothing("Could you summarize this article for me?", held_out=True),
    say("我对青霉素过敏", "用户对青霉素过敏", held_out=True),
    say("我在一家银行上班", "用户在一家银行上班", held_out=True),
    say("我有一个女儿", "用户有一个女儿", held_out=True),
    say("我平时喜欢看电影", "用户平时喜欢看电影", held_out=True),
    ask("我住在哪个城市？", "住", ("杭州",), ("钢琴",), held_out=True),
    ask("我会弹什么？", "弹", ("钢琴",), ("杭州",), held_out=True),
    change(
        "我已经不在医院工作了，现在在学校工作",
        "用户在医院工作",
        "工作",
        "用户在学校工作",
        "医院",
        held_out=True,
    ),
    nothing("请帮我翻译这句话", held_out=True),
]

CASES = ENGLISH + CHINESE + HELD_OUT_AFTER
