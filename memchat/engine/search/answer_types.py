"""The type of answer a question asks for, whose, and the memories that give it:
what someone does for a living, when they were born, when they married, when
they wake and sleep, what they do for pleasure, where they live, when an
appointment is, how old they are, what pets they keep.

"What's my job?" is the question a new user asks first, and the offline models
answer it badly: "Alice works as a nurse" stood 1.4 spreads out of the query's
background, "Fiona works as a pharmacist" and "张敏在华西医院的急诊科当护士" not at
all, and a relative's job ("Alice's husband Mark works as an accountant", "张敏
的丈夫刘伟是一名程序员") ranked above the user's own in most of the paraphrase
sets (benchmarks/README.md, "Thirty-ninth session"). The models read "job" as
close to the word "work", not to a sentence that says what someone works as.

So hybrid search reads the question's answer type, as question answering
systems do: ``asked_about`` says whether a question asks for an occupation and
whose (the user's, or a relative's by the relation word), and ``states`` whether
a memory says one for that person: "works as", "works at", "is a pharmacist",
"runs a farm", "teaches", "drives trains" (a job said by its work), "当护士",
"是一名程序员", "在医院工作", "开了一家花店", "开出租车". A memory
that does gets a typed match (fusion.py). Closed lists of general words, in
English and Chinese; a question that asks for no occupation is ranked as before.

Two life events work the same way, for the same reason: "When's my birthday
again?" did not find "Morag was born on 14 March 1978" (the models do not read
a birthday as a birth), nor "我俩啥时候领的证来着" "周海燕的结婚纪念日是五月二十日".
So do when someone wakes and sleeps ("作息" did not find "每天早上六点起床"), what
they do for pleasure ("我有啥爱好" did not find "业余喜欢唱花鼓戏") and the others
below, each for a question the models answered badly. Each type is an
``AnswerType``: how questions ask for it, how they ask for the user's own, and how
memories give it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .bridge import HAN_RE, MATCHES, is_name, relation_in, relations_named

__all__ = ["TypedQuestion", "asked_about", "states"]

_I = re.IGNORECASE
#: English questions for a job: the nouns, and "what does X do (for work)?".
_ASKS_EN = re.compile(
    r"\b(?:jobs?|occupations?|professions?|careers?|employers?|employed|employment|livelihood"
    r"|line\s+of\s+(?:work|business)|do\s+(?:for|at)\s+work|work\s+as|vocation)\b"
    r"|\b(?:for|make|makes|made|earn|earns|earned)\s+a\s+living\b"
    # "What does my older sister do?", "What did Dad do before he retired?"
    r"|\bwhat\s+(?:do|does|did)\s+(?:[\w'’-]+\s+){0,3}?[\w'’-]+\s+do"
    r"(?:\s+(?:now|nowadays|these\s+days|for\s+(?:work|money)|before\s+(?:\w+\s+)?retir\w*))?\s*[?.!]*\s*$"
    r"|\bwhere\s+(?:do|does|did)\s+\w+\s+work\b"
    r"|\b(?:shop|store|business|company|firm|restaurant|farm|practice)\s+(?:do|does|did)\s+\w+\s+(?:run|own)\b",
    _I,
)
#: Chinese questions for a job: 工作 / 职业 / 干什么的 / 哪一行 / 上班 / 生意.
_ASKS_ZH = re.compile(
    r"工作(?!日|室)|职业|行业|干哪一?行|做哪一?行|[哪这]一?行|营生|行当|饭碗|谋生|从事|在哪(?:儿|里)?上班"
    r"|(?:干|做)(?:什么|啥子?|嘛|咩)(?:的|工作|职业|生意|行当|营生|活|工|嘢)|是(?:干|做)(?:什么|啥子?|嘛|咩)"
)
#: The user in a Chinese question: 我, 俺, 咱, 用户, 本人.
_USER_ZH = "(?:我|俺|咱|用户|本人)"
#: Between the user and a word for a day of theirs ("我们的结婚纪念日"): no other 的.
_BEFORE_AN_EVENT = r"[^的，。？！?,.!\s]{0,4}?"


def _users_own_zh(
    words: str, *, together: str = "们", of: str = "的?", between: str = r"[^，。？！?,.!\s]{0,6}?"
) -> re.Pattern[str]:
    """A Chinese question asking for the user's own: the user (or the users
    ``together``: 我们, 我俩), ``of`` (的), a few runes ``between``, then one of ``words``."""
    return re.compile(rf"{_USER_ZH}(?:{together})?{of}{between}(?:{words})")


#: The user's own: "my job", "the user's previous career", "what do I do", "我是做什么的",
#: "我的职业", "我在哪上班" (not "我家…", "我…的哥们": someone of the user's).
_SELF_EN = re.compile(
    r"\b(?:my|user['’]s)\s+(?:(?:previous|former|current|old|first|last|main|present|own|day|real)\s+)?"
    r"(?:jobs?|occupations?|professions?|careers?|employers?|work|line\s+of\s+(?:work|business)|livelihood)\b"
    r"|\b(?:do|did|does|will|would|can)\s+(?:i|user)\s+(?:do|work|run|own)\b|\b(?:i|user)\s+(?:do|did|work|worked)\b",
    _I,
)
_SELF_ZH = re.compile(
    rf"{_USER_ZH}(?:以前|现在|目前|原来|之前|年轻(?:时|的时候|时候)|平时|到底|究竟|主要|具体|本来"
    r"|在单位|一直|当年|退休前|过去)*(?:是|在|干|做|从事|工作|上班|\s*的?\s*(?:职业|营生|饭碗|行当))"
)
#: Words that start an English question, capitalised, and name no one (besides the
#: bridge's own: "I", "My", "The", "User"…).
_QUESTION_WORDS = frozenset(
    {"What", "Whats", "What's", "Where", "Which", "Who", "Whose", "How", "When", "Why", "Do", "Does", "Did",
     "Is", "Was", "Tell", "Remind", "Can", "Could", "Please", "Any"}
)  # fmt: skip
_WORD = re.compile(r"[^\W\d_][\w'’-]*")

#: Nouns that name an occupation (English), for "is a …", "became a …".
_JOBS_EN = (
    "accountant", "actor", "actress", "administrator", "analyst", "architect", "artist", "assistant",
    "attendant", "attorney", "auditor", "baker", "banker", "barber", "barista", "bartender", "beautician",
    "bookkeeper", "builder", "butcher", "captain", "caregiver", "carer", "carpenter", "cashier", "chef",
    "chemist", "cleaner", "clerk", "coach", "consultant", "cook", "counsellor", "counselor", "courier",
    "curator", "dentist", "designer", "detective", "developer", "dietitian", "director", "doctor",
    "driver", "economist", "editor", "electrician", "engineer", "farmer", "firefighter", "fisherman",
    "florist", "gardener", "geologist", "guard", "guide", "hairdresser", "housekeeper", "illustrator",
    "instructor", "interpreter", "janitor", "journalist", "judge", "labourer", "laborer", "lawyer",
    "lecturer", "librarian", "lifeguard", "machinist", "manager", "mechanic", "midwife", "miner",
    "musician", "nanny", "nurse", "officer", "optician", "painter", "paramedic", "pharmacist",
    "photographer", "physician", "physicist", "physiotherapist", "pilot", "plumber", "police",
    "policeman", "policewoman", "porter", "postman", "principal", "producer", "professor", "programmer",
    "psychologist", "receptionist", "reporter", "researcher", "salesman", "saleswoman", "scientist",
    "secretary", "shopkeeper", "singer", "soldier", "solicitor", "surgeon", "surveyor", "tailor",
    "teacher", "technician", "therapist", "trainer", "translator", "tutor", "vet", "veterinarian",
    "waiter", "waitress", "welder", "writer", "author", "entrepreneur", "founder", "owner",
    "freelancer", "contractor", "intern", "apprentice", "student", "retiree", "pensioner",
)  # fmt: skip
#: First person anywhere: a question about someone of the user's it cannot tell.
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself|we|us|our)\b|我|俺|咱", _I)
#: Where people work for themselves: "runs a farm", "owns a bakery".
_BUSINESSES_EN = (
    "farm", "shop", "store", "business", "restaurant", "cafe", "café", "bakery", "company", "firm",
    "practice", "studio", "salon", "pub", "bar", "clinic", "garage", "hotel", "guesthouse", "agency",
    "bed and breakfast", "b&b", "stall", "workshop", "factory", "startup", "start-up", "surgery",
)  # fmt: skip
_ALT = "|".join
_STATES_EN = re.compile(
    r"\bwork(?:s|ed|ing)?\s+(?:as|for|at|there)\b"
    # A job said by its work: "drives trains", "drives a taxi", "delivers parcels".
    r"|\bdriv(?:es|ing|e|ers?)\s+(?:(?:an?|the)\s+(?:[\w-]+\s+)?(?:taxi|cab|bus|lorry|ambulance|tram|coach|hgv)"
    r"|(?:[\w-]+\s+)?(?:trains|buses|taxis|cabs|lorries|trucks|ambulances|trams|coaches|forklifts))\b"
    r"|\bdeliver(?:s|ed|ing)?\s+(?:the\s+)?(?:post|mail|parcels|packages)\b"
    r"|\bwork(?:s|ed|ing)?\s+(?:full|part)[-\s]time\b"
    r"|\b(?:employed|hired)\s+(?:as|by|at)\b"
    r"|\b(?:teach|teaches|taught|teaching)\b"
    r"|\b(?:retired|retiring)\s+(?:as|from)\b"
    r"|\b(?:is|was|am|are|were|been|became|becomes|trained\s+as|qualified\s+as|'s|’s)\s+(?:an?|the)\s+(?:[\w'’-]+\s+){0,3}?"
    rf"(?:{_ALT(_JOBS_EN)})s?\b"
    r"|\b(?:run|runs|ran|running|own|owns|owned|manage|manages|managed|opened|started|founded)\s+"
    r"(?:an?|the|his|her|their|my|our)\s+(?:[\w'’-]+\s+){0,3}?"
    rf"(?:{_ALT(map(re.escape, _BUSINESSES_EN))})\b",
    _I,
)
#: Chinese occupation words ("当护士", "是一名程序员", "做会计").
_JOBS_ZH = (
    "护士", "医生", "大夫", "老师", "教师", "教授", "工程师", "程序员", "设计师", "会计", "律师", "司机",
    "厨师", "警察", "记者", "编辑", "演员", "歌手", "作家", "画家", "保安", "快递员", "外卖员", "服务员",
    "公务员", "售货员", "销售", "理发师", "药剂师", "牙医", "兽医", "研究员", "技术员", "电工", "木匠",
    "飞行员", "空姐", "导游", "翻译", "模特", "主播", "店员", "收银员", "保姆", "月嫂", "经理", "主管",
    "主任", "老板", "农民", "工人", "军人", "士兵", "消防员", "法官", "建筑师", "分析师", "顾问",
    "咨询师", "讲师", "辅导员", "校长", "院长", "护工", "保洁", "清洁工", "厨子", "机长", "船长",
    "科学家", "工匠", "裁缝", "渔民", "渔夫", "牧民", "猎人", "船员", "水手", "海员", "柜员", "出纳", "交警",
    "民警", "医师", "护理", "保育员", "营业员", "调度员", "乘务员", "列车员", "司炉", "焊工", "钳工", "瓦工",
    "摄影师", "化妆师", "美容师", "健身教练", "教练", "实习生", "学生", "研究生", "甜点师", "面点师",
)  # fmt: skip
_STATES_ZH = re.compile(
    rf"(?:当|做|是|是一名|是一位|是个|担任|干|成为|作为)[^，。；！？,.;!?]{{0,10}}?(?:{_ALT(_JOBS_ZH)})"
    # A job the list lacks by its suffix: 冰雕师, 调酒师, 石匠, 安检员 (not 会员, 队员).
    r"|(?:当|是|是一名|是一位|是个|担任|成为)[\u4e00-\u9fff]{1,4}?(?:师|匠|(?<![会成党团队学社])员)(?![\u4e00-\u9fff])"
    r"|在[^，。；！？,.;!?]{1,16}?(?:工作|上班|任职|打工|教书|当差|实习)"
    r"|在[^，。；！？,.;!?]{0,12}?(?:公司|银行|医院|学校|工厂|厂|酒店|餐厅|商场|超市|机关|单位|集团|研究所|大学"
    r"|中学|小学|幼儿园|诊所|局|报社|电视台|律所|事务所)(?:里)?(?:做|当|教|开|写|管|负责|带)"
    r"|(?:开|经营|开了)[^，。；！？,.;!?]{0,3}?(?:一|两|几)?(?:家|间|个)[^，。；！？,.;!?]{0,10}?"
    r"(?:店|公司|餐馆|饭店|餐厅|诊所|工作室|厂|超市|茶行|铺|馆|行|农场|养殖场|排档|摊|档口|民宿|网店|小卖部)"
    r"|教(?:书|[^，。；！？,.;!?]{0,6}?(?:课|语文|数学|物理|化学|生物|英语|历史|地理|政治|音乐|体育|美术|钢琴))"
    r"|退休前|从事"
    r"|开(?:出租|的士|网约车|公交|大巴|货车|卡车|长途|救护车|地铁|火车|高铁|吊车|挖掘机|叉车)"
    r"|跑(?:出租|运输|滴滴|网约车|长途|货运)|送(?:快递|外卖)"
)


@dataclass(frozen=True)
class AnswerType:
    """How questions ask for one type of answer (``asks``), for the user's own
    (``users_own``), and how memories give it (``gives``)."""

    name: str
    asks: tuple[re.Pattern[str], ...]
    users_own: tuple[re.Pattern[str], ...]
    gives: tuple[re.Pattern[str], ...]


OCCUPATION = AnswerType("occupation", (_ASKS_EN, _ASKS_ZH), (_SELF_EN, _SELF_ZH), (_STATES_EN, _STATES_ZH))
BIRTH = AnswerType(
    "birth",
    (re.compile(r"\b(?:birthdays?|born|date\s+of\s+birth)\b", _I), re.compile(r"生日|过生|出生|出世|生辰")),
    (
        re.compile(
            r"\b(?:my|our)\s+(?:[\w-]+\s+)?birthday\b|\b(?:was\s+i|i\s+was)\s+born\b|\bmy\s+date\s+of\s+birth\b",
            _I,
        ),
        _users_own_zh("生日|过生|出生|出世|生辰", between=_BEFORE_AN_EVENT),
    ),
    (re.compile(r"\b(?:born|birthdays?|date\s+of\s+birth)\b", _I), re.compile(r"生日|出生|生于|过生")),
)
WEDDING = AnswerType(
    "wedding",
    (
        re.compile(r"\b(?:anniversary|wedding|married|marry|marriage)\b", _I),
        re.compile(r"结婚|领证|领的证|婚礼|纪念日|成亲"),
    ),
    (
        re.compile(
            r"\b(?:my|our)\s+(?:[\w-]+\s+)?(?:anniversary|wedding|marriage)\b"
            r"|\b(?:did|were|was)\s+(?:i|we)\s+(?:get\s+)?(?:married|marry)\b|\b(?:i|we)\s+(?:got\s+)?married\b",
            _I,
        ),
        _users_own_zh("结婚|领证|领的证|婚礼|纪念日|成亲", together="们|俩|两口子", between=_BEFORE_AN_EVENT),
    ),
    (re.compile(r"\b(?:married|wedding|anniversary|marriage)\b", _I), re.compile(r"结婚|领证|婚礼|纪念日")),
)
#: When someone sleeps and wakes: "作息" did not find "每天早上六点起床", nor "我一天
#: 是怎么开头的" "丽华每天早上六点起床". Not "routine" or 早起 alone: a morning routine
#: or an early swim asks about what is done, not about waking.
_WAKE_OR_SLEEP = (
    r"(?:wake|get\s+up|go\s+to\s+bed|turn\s+in|hit\s+the\s+(?:sack|hay)"
    r"|(?:roll|get|climb)\s+out\s+of\s+bed)\b"
)
ROUTINE = AnswerType(
    "routine",
    (
        re.compile(
            r"\b(?:bed\s*time|go(?:es)?\s+to\s+bed|wake|wakes|waking|get\s+up|gets\s+up|alarm|out\s+of\s+bed"
            r"|sleep\s+schedule|early\s+bird|night\s+owl|turn\s+in|hit\s+the\s+(?:sack|hay))\b",
            _I,
        ),
        re.compile(r"作息|生物钟|几点(?:钟)?(?:睡|起|上床|休息|爬起)|一天[^，。？！?,.!]{0,3}(?:开头|开始)"),
    ),
    (
        re.compile(
            r"\b(?:my|our|user['’]s)\s+(?:[\w-]+\s+)?(?:bed\s*time|alarm|sleep\s+schedule)\b"
            rf"|\b(?:do|did|does|should)\s+(?:i|we|user)\s+(?:\w+ly\s+)?{_WAKE_OR_SLEEP}"
            rf"|\bi\s+(?:\w+ly\s+)?{_WAKE_OR_SLEEP}",
            _I,
        ),
        _users_own_zh("作息|生物钟|睡|起|上床|休息|开头|开始"),
    ),
    (
        re.compile(
            r"\b(?:goes|go|went|going)\s+to\s+(?:bed|sleep)\b|\b(?:wakes?|woke|waking|gets?|got|getting)\s+up\b"
            r"|\bbed\s*time\b|\basleep\s+by\b|\bearly\s+riser\b|\bnight\s+owl\b",
            _I,
        ),
        re.compile(r"睡觉|入睡|就寝|起床|上床|熬夜|早睡|晚睡|作息|生物钟"),
    ),
)
#: What someone does for pleasure: "what do I tinker with as a pastime" did not find
#: "Maggie's hobby is restoring vintage bicycles", nor "我有啥爱好" "晓梅业余喜欢唱花鼓戏".
HOBBY = AnswerType(
    "hobby",
    (
        re.compile(
            r"\b(?:hobby|hobbies|pastimes?|for\s+fun|spare\s+time|free\s+time|leisure|downtime|days?\s+off)\b",
            _I,
        ),
        re.compile(
            r"爱好|兴趣|业余|消遣|闲暇|空闲|休息日|(?:周末|平时|没事|闲着|有空)[^，。？！?,.!]{0,3}(?:爱|喜欢)(?:干|做|玩|弄|搞)"
        ),
    ),
    (
        re.compile(
            r"\b(?:my|user['’]s)\s+(?:[\w-]+\s+)?(?:hobby|hobbies|pastimes?|spare\s+time|free\s+time|leisure|downtime"
            r"|days?\s+off)\b|\b(?:do|does|did)\s+(?:i|user)\s+(?:do|make|play|tinker)\b",
            _I,
        ),
        _users_own_zh("爱好|兴趣|业余|消遣|闲暇|空闲|休息日|爱干|爱玩|爱做|喜欢干|喜欢玩|喜欢做"),
    ),
    (
        re.compile(
            r"\b(?:hobby|hobbies|pastimes?|for\s+fun|in\s+(?:his|her|their|my)\s+(?:spare|free)\s+time"
            r"|(?:enjoys|loves|likes)\s+(?:\w+\s+)?(?!(?:morn|even|some|no|every)?thing\b|morning|evening)\w+ing"
            r"|likes\s+to\s+\w+|keen\s+\w+er|avid|is\s+into)\b",
            _I,
        ),
        re.compile(
            r"爱好|兴趣|业余|消遣|闲暇|有空(?:就|时|的时候)|迷上|热衷|票友"
            r"|喜欢(?!吃|喝)[^，。；！？,.;!?]{0,2}?(?:去|玩|打|踢|下|钓|跑|爬|唱|跳|弹|拉|画|练|逛|骑|游|种|养|听|拍|收藏|徒步)"
        ),
    ),
)
#: Where someone lives: "我家在哪片儿？" did not find "伟明在高新区租了一套两居室", nor
#: "which town's closest to my place" "User lives on a lifestyle block outside Motueka".
_HOMES_EN = r"(?:place|home|house|flat|apartment|property|address|neighbou?rhood)"
RESIDENCE = AnswerType(
    "residence",
    (
        re.compile(
            r"\bwhere\s+(?:do|does|did)\s+(?:[\w'’-]+\s+){1,3}?(?:live|stay|reside)\b"
            rf"|\b(?:lives?|lived|reside|resides)\b|\b(?:my|our|user['’]s)\s+{_HOMES_EN}\b|\baddress\b",
            _I,
        ),
        re.compile(
            r"住(?:在|喺)?(?:哪|什么地方|啥地方|哪个|边度|边个)|家(?:住|在)|住址|地址|落脚|住的地方|住处|哪个小区|哪片"
        ),
    ),
    (
        re.compile(
            r"\b(?:do|did|does)\s+(?:i|we|user)\s+(?:\w+\s+)?(?:live|stay|reside)\b|\bi\s+(?:live|stay)\b"
            rf"|\b(?:my|our|user['’]s)\s+{_HOMES_EN}\b",
            _I,
        ),
        _users_own_zh("住|家在|落脚|地址|住址|哪片", of="(?:家|的)?"),
    ),
    (
        re.compile(
            r"\b(?:lives?|living|lived|resides?|stays?)\s+(?:in|on|at|near|outside|with|just|by|above|close)\b"
            r"|\b(?:moved|relocated)\s+to\b|\bhome\s+is\b"
            r"|\b(?:house|flat|apartment|bungalow|cottage|condo|block)\s+(?:in|on|at|near|outside)\b"
            r"|\b(?:rents?|bought)\s+an?\s+(?:[\w-]+\s+){0,2}?(?:house|flat|home|apartment)\b"
            r"|\bbased\s+(?:in|at|near|out\s+of)\b",
            _I,
        ),
        # The town someone works in, short of a memory saying where they live: "Alice
        # works as a nurse in Berlin" answers "Where do I live?" (the issue's example).
        # A capitalised place, so not "works in marketing", "in the garden".
        re.compile(r"\b[Ww]ork(?:s|ed|ing)?\b[^.;:!?]{0,40}?\bin\s+[A-Z][a-z]"),
        re.compile(r"住在|住(?!院)|家在|安家|落户|定居|租了|买了房|搬到|搬去|小区"),
    ),
)
#: An appointment: "Remind me when I'm seeing someone about my knee" did not find
#: "Morag has a physiotherapy appointment … on 15 December", nor "我下次拍片子是哪天"
#: "用户…要去医大二院复查腰椎核磁共振".
_APPOINTMENTS_EN = (
    r"appointments?|appt|booked|check-?ups?|follow-?ups?|consultations?|scans?|jabs?|jags?|vaccinations?"
)
APPOINTMENT = AnswerType(
    "appointment",
    (
        re.compile(
            rf"\b(?:{_APPOINTMENTS_EN}|due\s+(?:for|in)|seeing\s+(?:the|a|my|someone|somebody)"
            r"|see\s+(?:the|a|my)\s+(?:doctor|dentist|gp|specialist|physio\w*))\b",
            _I,
        ),
        re.compile(r"预约|约了|约在|复查|复诊|回诊|体检|检查|接种|疫苗|看医生|看病|看牙|拍片|下次|下回"),
    ),
    (
        re.compile(
            r"\b(?:my|our|user['’]s)\b|\b(?:am|do|did|will|should)\s+(?:i|we)\b|\bi['’]m\b|\bi\s+am\b", _I
        ),
        re.compile(_USER_ZH),
    ),
    (
        re.compile(rf"\b(?:{_APPOINTMENTS_EN}|scheduled|due\s+(?:for|in|on))\b", _I),
        re.compile(r"预约|约了|约在|复查|复诊|回诊|体检|定于|定在|安排在|接种|疫苗|拔牙|补牙|洗牙|检查"),
    ),
)
#: How old someone is: "How old is my granddaughter?" did not find "孙女朵朵今年七岁"
#: (the word "old" matched "his old trawler" instead). An age is said with a number
#: and years, or by a birth. Not "old" alone, nor 多大 alone (how big).
AGE = AnswerType(
    "age",
    (
        re.compile(r"\bhow\s+old\b|\bwhat\s+age\b|\b(?:my|his|her|their|user['’]s)\s+age\b", _I),
        re.compile(r"多大(?:了|年纪|岁数|岁)|几岁|年龄|年纪|岁数|高寿"),
    ),
    (
        re.compile(
            r"\bhow\s+old\s+(?:am\s+i|are\s+we|is\s+(?:the\s+)?user)\b|\bmy\s+age\b|\bwhat\s+age\s+am\s+i\b",
            _I,
        ),
        _users_own_zh("多大|几岁|年龄|年纪|岁数"),
    ),
    (
        re.compile(
            r"\b(?:\d+|[a-z]+(?:[-\s][a-z]+)?)[-\s]+(?:years?|yrs?|months?)[-\s]+old\b|\baged\s+\d+\b"
            r"|\b(?:turns?|turned|turning)\s+\d+\b|\bborn\b|\bin\s+(?:his|her|their|my)\s+(?:early\s+|late\s+|mid-?)?"
            r"(?:teens|twenties|thirties|forties|fifties|sixties|seventies|eighties|nineties)\b",
            _I,
        ),
        re.compile(
            r"[\d一二两三四五六七八九十百]+(?:周)?岁|年龄|年纪|岁数|出生|生于|[\d一二两三四五六七八九十]+个月大"
        ),
    ),
)
#: A pet: "Do I own any pets?" did not find "Callum has a ginger tomcat called
#: Skipper" (a neighbour's dog holding "owns" stood first); the models read a
#: tomcat as no pet. Memories give one by the animal's kind.
_PET_KINDS_EN = (
    "cats?", "kittens?", "kitty", "kitties", "tomcats?", "moggy", "moggies", "tabby", "tabbies", "dogs?",
    "pupp(?:y|ies)", "pups?", "doggy", "doggo", "pooch", "hounds?", "collies?", "terriers?", "spaniels?",
    "labradors?", "retrievers?", "poodles?", "dachshunds?", "beagles?", "corgis?", "huskies", "husky",
    "pugs?", "bulldogs?", "greyhounds?", "whippets?", "lurchers?", "sheepdogs?", "alsatians?", "schnauzers?",
    "chihuahuas?", r"shih\s+tzus?", "hamsters?", "gerbils?", r"guinea\s+pigs?", "rabbits?", "bunn(?:y|ies)",
    "ferrets?", "parrots?", "budgies?", "budgerigars?", "canar(?:y|ies)", "cockatiels?", "parakeets?",
    "goldfish", r"fish\s+tank", "aquarium", "tortoises?", "turtles?", "snakes?", "lizards?", "geckos?",
    "iguanas?", "ponies", "pony", "horses?", "pets?",
)  # fmt: skip
PET = AnswerType(
    "pet",
    (
        re.compile(
            r"\b(?:pets?|animals?|critters?|furry\s+(?:friends?|family|babies)|four[-\s]legged)\b", _I
        ),
        re.compile(r"宠物|毛孩子|小动物|动物|铲屎"),
    ),
    (
        re.compile(
            r"\b(?:my|our|user['’]s)\s+(?:[\w-]+\s+)?(?:pets?|animals?|critters?|furry\s+\w+)\b"
            r"|\b(?:do|did|does|have)\s+(?:i|we|user)\s+(?:\w+\s+)?(?:have|own|keep|got|get)\b"
            r"|\b(?:i|we)\s+(?:have|own|keep)\b",
            _I,
        ),
        _users_own_zh("宠物|毛孩子|小动物|动物|养", of="(?:家|的)?"),
    ),
    (
        re.compile(
            rf"\b(?:{_ALT(_PET_KINDS_EN)})\b"
            r"|\b(?:keeps?|kept|keeping|raises?|raised|has|have|had|owns?|owned)\s+(?:[\w-]+\s+){0,3}?"
            r"(?:hens|chickens|ducks|geese|goats|sheep|pigs|bees|alpacas|donkeys?|cows|cattle)\b",
            _I,
        ),
        re.compile(
            r"(?<!夜)猫|(?<!热)狗|宠物|仓鼠|兔|鹦鹉|八哥|画眉|金鱼|鱼缸|乌龟|蜥蜴|柯基|泰迪|金毛|哈士奇|柴犬|拉布拉多|边牧|博美|比熊"
            r"|养(?:了|着)?[^，。；！？,.;!?]{0,4}?(?:只|条|头|匹|缸|对|窝)"
        ),
    ),
)
_SPOUSES = frozenset({"wife", "husband", "partner"})
#: The types read, in this order (a question asking for two gets the first: "How
#: old is my cat?" asks for an age).
ANSWER_TYPES = (OCCUPATION, BIRTH, WEDDING, ROUTINE, HOBBY, RESIDENCE, APPOINTMENT, AGE, PET)


@dataclass(frozen=True)
class TypedQuestion:
    """A question asking for ``kind`` of answer about the user (neither other field
    set), the relative a relation group names ("husband", "brother"), or the
    person a name names ("What is Ciara's job?": a relation the memories answer
    with a name)."""

    kind: AnswerType = OCCUPATION
    relation: str | None = None
    name: str | None = None


def asked_about(query: str) -> TypedQuestion | None:
    """The type of answer ``query`` asks for, and whose: a relative's when it names
    one ("my brother's job"), the user's when it asks in the first person or
    names no one ("occupation"), a named person's ("Tom job"); None for any
    other question and for one about someone of the user's it cannot tell ("my
    mate in Hsinchu", "我读书时的上铺兄弟")."""
    for kind in ANSWER_TYPES:
        if any(pattern.search(query) for pattern in kind.asks):
            return _whose(query, kind)
    return None


def _whose(query: str, kind: AnswerType) -> TypedQuestion | None:
    relation = relation_in(query)
    if relation is not None:
        return TypedQuestion(kind, relation=relation[0])
    if any(pattern.search(query) for pattern in kind.users_own):
        return TypedQuestion(kind)
    names = [w.removesuffix("'s").removesuffix("’s") for w in _WORD.findall(query)]
    names = [w for w in names if is_name(w) and w not in _QUESTION_WORDS]
    if names:
        return TypedQuestion(kind, name=names[0])
    if _FIRST_PERSON.search(query):
        return None  # someone of the user's, not the user
    chinese = [found for pattern in kind.asks if (found := pattern.search(query)) and HAN_RE.match(found[0])]
    if chinese and HAN_RE.search(query[: chinese[0].start()]):
        return None  # "王强是干什么的": a Chinese name (the bridge asks so for "我老公")
    return TypedQuestion(kind)


def states(text: str, question: TypedQuestion) -> bool:
    """Whether the memory gives the answer ``question`` asks for, about its person:
    the user (it names no relative), that relative, or the named person."""
    if not any(pattern.search(text) for pattern in question.kind.gives):
        return False
    if question.name is not None:
        return re.search(rf"\b{re.escape(question.name)}\b", text) is not None
    named = relations_named(text)
    if question.relation is None:
        return not named
    if question.kind is WEDDING and question.relation in _SPOUSES and not named:
        return True  # "我跟媳妇哪天领的证": the couple's, which the memory may say by names
    return bool(MATCHES[question.relation] & named)
