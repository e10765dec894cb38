"""Templated training statements for the statement model (conversations/statements.py), English and Chinese.

Every sentence here is *generated* (source "templated"): a template written for this purpose, filled
from lexicons built from the repository's own name lists (entities/data: US Census given names, MIT;
GeoNames places, CC BY 4.0) and from word lists composed here. None of it comes from LoCoMo,
LongMemEval or the fresh sets of bench/ (the values of bench/supersede_fresh.json are removed from
every lexicon, so no fresh value is ever a training value).

A template marks spans as `[type:{filler}]` and the sentence's class after `|`. Span types: the
subject's own employer, title (job), location (home), partner — each also with `_x`, a value that
stopped holding — origin, family, pet, like, dislike, plan. `!type` after the class marks a
statement that ends the subject's current value of a single-valued type without naming it
("I quit my job"). Subjects: I (first person) or a name (the extractor's third-person rewrite);
`{be}`, `{have}`, `{s}` (a verb's third-person -s), `{my}` conjugate.
"""

import json
import random
import re
from pathlib import Path

from bench.statement_templates import EN, ZH

ROOT = Path(__file__).resolve().parents[1]
FRESH = ROOT / "bench" / "supersede_fresh.json"

CLASSES = ("state_change", "plan", "habit", "preference", "biographical", "other")
SPAN_TYPES = ("employer", "employer_x", "title", "title_x", "location", "location_x", "partner", "partner_x",
              "origin", "family", "pet", "like", "dislike", "plan")
ENDS = ("employer", "title", "location", "partner")

# --- lexicons ---------------------------------------------------------------------------------

_CO_HEADS = ("Acme Nova Vertex Orbit Pioneer Summit Harbor Cedar Maple Granite Silver Blue Red Green Bright Apex "
             "Atlas Beacon Crescent Delta Echo Falcon Horizon Iris Juniper Keystone Lumen Meridian Nimbus Onyx Pinnacle "
             "Quartz Riverstone Sequoia Titan Umbra Vantage Willow Zenith Northstar Bluebird Ironwood Lakeside "
             "Redwood Stonebridge Clearwater Brightline Sunrise Kestrel Copper Oakridge Highland Coastal").split()
_CO_TAILS = ("Labs|Systems|Corp|Inc|Group|Bank|Health|Media|Logistics|Software|Analytics|Capital|Foods|Motors|"
             "Energy|Studios|Pharma|Robotics|Insurance|Consulting|Partners|Networks|Airlines|Games|Retail").split("|")
_CO_SINGLE = ("Zorbit Quillo Brightwave Datalux Kinetica Mindforge Novatek Plexor Synthra Trivium Umbrex Velora "
              "Wexley Yonder Zephyrix Lumio Cobaltix Fernway Glimmr Hexaware Inkwell Jolt Kivra Loomis Mavrik").split()
_ORG_KIND = ("a startup|a law firm|a hospital|a bank|a bakery|a school|the city library|a university|an agency|"
             "a nonprofit|a restaurant|a hotel|a museum|a clinic|a consulting firm|the post office|a factory|"
             "a tech company|a design studio|a call center").split("|")
_TITLES = ("software engineer|data scientist|product manager|nurse|teacher|accountant|graphic designer|chef|lawyer|"
           "sales manager|marketing director|research scientist|web developer|pharmacist|architect|electrician|"
           "mechanic|dentist|journalist|photographer|financial analyst|project manager|UX designer|civil engineer|"
           "paramedic|librarian|barista|consultant|backend developer|QA engineer|data analyst|copywriter|"
           "physical therapist|veterinarian|pilot|flight attendant|social worker|translator|HR manager|"
           "operations manager|devops engineer|security analyst|sous chef|personal trainer|radiologist|tutor|"
           "real estate agent|store manager|video editor|game designer|mobile developer|ML engineer|"
           "professor|postdoc|intern|team lead|CTO|office manager|carpenter|plumber|firefighter").split("|")
_RANK = ("senior|lead|principal|head|chief|staff").split("|")
_KIN = ("sister|brother|mom|dad|mother|father|wife|husband|son|daughter|grandma|grandpa|aunt|uncle|cousin|"
        "niece|nephew|stepdad|stepmom|twin brother|little sister|older brother|kids|parents|in-laws").split("|")
_FRIEND = ("friend|best friend|coworker|colleague|boss|neighbor|roommate|classmate|manager|teammate").split("|")
_PET_KINDS = ("dog|cat|puppy|kitten|parrot|hamster|rabbit|turtle|horse|guinea pig|goldfish|lizard").split("|")
_PET_NAMES = ("Biscuit|Luna|Pepper|Ziggy|Noodle|Maple|Bean|Olive|Waffles|Pickles|Rocky|Coco|Shadow|Ginger|"
              "Peanut|Bruno|Daisy|Milo|Oreo|Juniper|Tofu|Sushi|Kiwi|Mango|Pumpkin").split("|")
_LIKES = ("jazz|spicy food|hiking|board games|sushi|old movies|gardening|rock climbing|yoga|podcasts|sci-fi novels|"
          "green tea|dark chocolate|baking bread|the ocean|cycling|chess|pottery|photography|running|camping|"
          "watercolor painting|anime|country music|thai curry|knitting|video games|crossword puzzles|kayaking|"
          "short answers|detailed explanations|bullet points|code examples|emails over calls|mornings|"
          "quiet cafes|horror films|poetry|basketball|tennis|fantasy books|dumplings|espresso|vinyl records|tea|coffee|"
          "pizza|ramen|tacos|red wine|craft beer|musicals|opera|soccer|golf|skiing|surfing|birdwatching|history podcasts|"
          "true crime shows|indie games|mystery novels|street food|long walks|sunny days|rainy evenings|cats|dogs|"
          "modern art|classical music|hip hop|K-pop|Italian food|vegan recipes|puzzles|Lego|card games|road trips|"
          "painting landscapes|playing the violin|watching football|reading comics|making pasta|swimming in lakes|"
          "writing short stories|playing video games|cooking for friends|learning languages|brief replies|"
          "examples in Python|step-by-step answers|formal emails|dark mode").split("|")
_ACTIVITIES = ("run|swim|meditate|journal|do yoga|walk the dog|read|practice piano|cook dinner|go to the gym|"
               "stretch|call my mom|water the plants|bike to work|study Spanish").split("|")
_GOALS = ("run a marathon|learn Japanese|open a bakery|write a novel|buy a house|start a podcast|get a master's degree|"
          "climb Kilimanjaro|learn to surf|publish a book|adopt a child|visit every national park|start a business|"
          "become a teacher|learn the guitar").split("|")
_WHEN = ("next week|next month|in May|this summer|in the spring|next year|on Friday|in two weeks|in December|"
         "over the holidays|this weekend|in August").split("|")
_PAST_WHEN = ("last week|last month|in March|yesterday|a few days ago|recently|this spring|two weeks ago|on Monday|"
              "last year").split("|")
_CHAT = ("Thanks, that helps a lot.|Can you explain that again?|Haha that's hilarious.|What do you think about it?|"
         "I'm not sure yet.|That sounds great!|Let me check and get back to you.|Good morning!|"
         "It was raining all day.|The meeting ran long today.|That movie was so good.|Sure, go ahead.|"
         "I read an article about climate change.|The traffic was terrible this morning.|Happy birthday!|"
         "What a beautiful sunset.|I forgot my umbrella again.|The printer is broken.|Sounds like a plan.|"
         "How was your weekend?|Tell me more about that.|I saw a great documentary.").split("|")

_ZH_CO_WHOLE = ("快手|拼多多|携程|蔚来|理想汽车|比亚迪|海尔|格力|联想|中兴|顺丰|滴滴|小红书|哔哩哔哩|"
                "知乎|贝壳|得物|米哈游|大疆|宁德时代|安踏|李宁|农夫山泉|德勤|普华永道|中信|工商银行|建设银行|"
                "中国移动|中国电信|国家电网|新东方|好未来|微众银行|蚂蚁集团|商汤|旷视|科大讯飞").split("|")
_ZH_CO = ("星辰|远航|蓝海|云帆|启明|华信|嘉禾|瑞丰|博远|天成|新锐|恒达|智源|卓越|汇通|鼎盛|明德|宏图|创新|海纳|"
          "青藤|金桥|银河|绿洲|腾飞|万象|同创|长风|锦程|众望").split("|")
_ZH_CO_TAIL = ("科技|集团|银行|公司|网络|传媒|医疗|教育|物流|软件|咨询|保险|证券|电子|汽车|食品|游戏|律所|设计院|研究院").split("|")
_ZH_TITLES = ("工程师|产品经理|设计师|会计|护士|医生|律师|老师|销售|程序员|数据分析师|编辑|记者|翻译|厨师|"
              "摄影师|建筑师|运营|人事专员|财务经理|项目经理|前端开发|测试工程师|算法工程师|咨询顾问|药剂师|"
              "心理咨询师|客服|店长|研究员|教授|实习生|司机|技术总监").split("|")
_ZH_KIN = ("姐姐|妹妹|哥哥|弟弟|妈妈|爸爸|老婆|老公|儿子|女儿|奶奶|爷爷|外婆|舅舅|阿姨|表哥|表妹|父母|孩子").split("|")
_ZH_FRIEND = ("朋友|同事|室友|同学|领导|邻居|闺蜜|老板|同桌").split("|")
_ZH_PETS = ("狗|猫|小狗|小猫|兔子|鹦鹉|仓鼠|乌龟|金鱼").split("|")
_ZH_PET_NAMES = ("旺财|小白|豆豆|花花|球球|咪咪|团团|毛毛|可乐|布丁|年糕|饺子|丸子|雪球").split("|")
_ZH_LIKES = ("茶|绿茶|奶茶|红酒|啤酒|饺子|面条|寿司|烧烤|小龙虾|滑雪|露营|骑行|羽毛球|乒乓球|"
             "网球|足球|桌游|拼图|书法|围棋|京剧|相声|动漫|科幻小说|推理小说|古典音乐|摇滚|爬山|喝茶|看电影|打篮球|做饭|旅游|听音乐|画画|跑步|游泳|看书|火锅|咖啡|弹吉他|摄影|钓鱼|"
             "烘焙|下棋|瑜伽|甜食|川菜|追剧|简短的回答|带代码的例子|详细的解释").split("|")
_ZH_GOALS = ("考研|学日语|买房|开一家咖啡店|跑马拉松|写一本书|考驾照|出国留学|学游泳|创业").split("|")
_ZH_WHEN = ("下周|下个月|明年|这个周末|五月|暑假|国庆节|年底|下周五|春节").split("|")
_ZH_PAST = ("上周|上个月|去年|前几天|昨天|三月份|最近|今年年初").split("|")
_ZH_CHAT = ("谢谢你的帮助。|你能再解释一下吗？|哈哈太好笑了。|你觉得怎么样？|我还不确定。|听起来不错！|"
            "今天下了一整天雨。|会议开了很久。|那部电影真好看。|早上好！|路上堵车很厉害。|生日快乐！|"
            "我又忘带伞了。|打印机坏了。|周末过得怎么样？|我看了一个很好的纪录片。").split("|")


def _fresh_values() -> set[str]:
    """Every word of the fresh set, so no lexicon value is one of its values."""
    pairs = json.loads(FRESH.read_text())["pairs"]
    words = set()
    for p in pairs:
        for text in (p["old"], p["new"]):
            words.update(w.lower() for w in re.findall(r"[A-Z][\w'’.-]+", text))
            words.update(re.findall(r"[\u4e00-\u9fff]{2,4}", text))
    return words


class Lexicon:
    def __init__(self, rng: random.Random):
        self.rng = rng
        fresh = _fresh_values()
        data = ROOT / "entities" / "data"
        names = [n.strip() for n in (data / "given_names.txt").read_text().split("\n") if n.strip()]
        self.names = [n.title() for n in names if n.isalpha() and n not in fresh and len(n) > 2]
        places = [p.strip() for p in (data / "places.txt").read_text().split("\n") if p.strip()]
        self.places = [" ".join(w.title() for w in p.split()) for p in places
                       if p.isascii() and re.fullmatch(r"[a-z ]{3,20}", p) and p not in fresh]
        self.zh_places = [p for p in places if re.fullmatch(r"[\u4e00-\u9fff]{2,4}", p) and p not in fresh
                          and not any(p in f or f in p for f in fresh if len(f) >= 2)]
        self.fresh = fresh

    def pick(self, seq):
        return self.rng.choice(seq)

    def company(self) -> str:
        r = self.rng.random()
        if r < 0.45:
            name = f"{self.pick(_CO_HEADS)} {self.pick(_CO_TAILS)}"
        elif r < 0.75:
            name = self.pick(_CO_SINGLE)
        else:
            name = f"{self.pick(self.names)}{self.pick(['', ' & Co', ' Bros', 'son'])}"
        return name if name.lower() not in self.fresh else "Vertex Labs"

    def org(self) -> str:
        return self.company() if self.rng.random() < 0.75 else self.pick(_ORG_KIND)

    def title(self) -> str:
        t = self.pick(_TITLES)
        return f"{self.pick(_RANK)} {t}" if self.rng.random() < 0.2 else t

    def place(self) -> str:
        return self.pick(self.places)

    def zh_company(self) -> str:
        r = self.rng.random()
        if r < 0.35:
            name = self.pick(_ZH_CO_WHOLE)
        elif r < 0.5:
            name = self.pick(_ZH_CO) + self.pick(_ZH_CO)  # a name with no kind word ("星辰远航")
        else:
            name = self.pick(_ZH_CO) + self.pick(_ZH_CO_TAIL)
        return name if name not in self.fresh else "星辰科技"

    def zh_place(self) -> str:
        return self.pick(self.zh_places)


# --- templates: EN and ZH, in bench/statement_templates.py -----------------------------------

_SPAN = re.compile(r"\[(\w+):([^\]]+)\]")


def _templates(block: str):
    out = []
    for line in block.strip().split("\n"):
        text, _, label = line.rpartition(" | ")
        parts = label.split()
        out.append((text.strip(), parts[0], [p[1:] for p in parts[1:] if p.startswith("!")]))
    return out


EN_TEMPLATES = _templates(EN)
ZH_TEMPLATES = _templates(ZH)


def _conjugate(text: str, first: bool, name: str, rng) -> str:
    subject = "I" if first else name
    text = text.replace("{S2}", "I" if first else rng.choice(["they", "she", "he"]))
    text = re.sub(r"(^|[.:!]\s+|Every evening )\{S\}", lambda m: m.group(1) + subject, text)
    text = text.replace("{S}", subject)
    their = rng.choice(["their", "his", "her"])
    text = text.replace("{My}", "My" if first else f"{name}'s").replace("{my}", "my" if first else their)
    text = text.replace("{me}", "me" if first else "them")
    text = text.replace("{be}", "am" if first else "is").replace("{have}", "have" if first else "has")
    text = text.replace("{s}", "" if first else "s").replace("{es}", "" if first else "es")
    text = text.replace("I am", "I'm") if rng.random() < 0.4 else text
    # Verbs a third-person subject conjugates: "love{s}" handled above; "don't" -> "doesn't".
    if not first:
        text = text.replace(" don't ", " doesn't ").replace(" want to", " wants to")
    return text


def _fill(text: str, lex: Lexicon, rng) -> str:
    values = {
        "co": lex.company(), "co2": lex.company(), "org": lex.org(), "job": lex.title(), "job2": lex.title(),
        "city": lex.place(), "city2": lex.place(), "name": lex.pick(lex.names), "kin": lex.pick(_KIN),
        "friend": lex.pick(_FRIEND), "pk": lex.pick(_PET_KINDS), "pn": lex.pick(_PET_NAMES),
        "like": lex.pick(_LIKES), "like2": lex.pick(_LIKES), "act": lex.pick(_ACTIVITIES), "goal": lex.pick(_GOALS),
        "when": lex.pick(_WHEN), "past": lex.pick(_PAST_WHEN), "chat": lex.pick(_CHAT),
        "zco": lex.zh_company(), "zco2": lex.zh_company(), "zjob": lex.pick(_ZH_TITLES), "zjob2": lex.pick(_ZH_TITLES),
        "zcity": lex.zh_place(), "zcity2": lex.zh_place(), "zname": lex.pick(["小王", "小李", "阿杰", "晓雯", "子轩",
                                                                                 "思琪", "浩然", "佳怡", "小张", "大伟"]),
        "zkin": lex.pick(_ZH_KIN), "zfriend": lex.pick(_ZH_FRIEND), "zpk": lex.pick(_ZH_PETS),
        "zpn": lex.pick(_ZH_PET_NAMES), "zlike": lex.pick(_ZH_LIKES), "zlike2": lex.pick(_ZH_LIKES),
        "zgoal": lex.pick(_ZH_GOALS), "zwhen": lex.pick(_ZH_WHEN), "zpast": lex.pick(_ZH_PAST),
        "zchat": lex.pick(_ZH_CHAT),
    }
    if "{job}s" in text:
        text = text.replace("{job}s", values["job"] + "s")
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    # "a engineer" -> "an engineer"
    return re.sub(r"\ba (?=[aeiouAEIOU])", "an ", text)


def example(rng: random.Random, lex: Lexicon, zh: bool, template=None) -> dict:
    """One generated statement: its text, subject, class, spans [(type, start, end)] and ended slots."""
    text, cls, ends = template or rng.choice(ZH_TEMPLATES if zh else EN_TEMPLATES)
    first = rng.random() < 0.5
    name = rng.choice(lex.names + ["User"]) if not zh else rng.choice(lex.names[:1500] + ["小明", "王芳", "李雷", "用户"])
    if zh:
        text = text.replace("{S}", "我" if first else name)
    else:
        text = _conjugate(text, first, name, rng)
    text = _fill(text, lex, rng)
    if not zh and rng.random() < 0.25:  # lead-ins a chat adds ("My" is the only first word lowered)
        text = rng.choice(["Guess what, ", "Oh, ", "Honestly, ", "By the way, ", "So, ", "Well, "]) + \
            (text[0].lower() + text[1:] if text.startswith(("My ", "Every ")) else text)
    if zh and rng.random() < 0.2:
        text = rng.choice(["对了，", "其实", "跟你说，", "哈哈，"]) + text
    spans, plain, cursor = [], "", 0
    for m in _SPAN.finditer(text):
        plain += text[cursor:m.start()]
        start = len(plain)
        plain += m.group(2)
        spans.append((m.group(1), start, len(plain)))
        cursor = m.end()
    plain += text[cursor:]
    if rng.random() < 0.15:  # the day stamp the extractor appends to a dated statement
        plain = plain.rstrip("。.!！") + rng.choice([" (17 June 2023).", "（2023年6月17日）。", " (week of 3 May 2024)."])
    return {"text": plain, "subject": "" if first else name, "class": cls, "spans": spans, "ends": ends,
            "lang": "zh" if zh else "en", "source": "templated"}


def generate(count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    lex = Lexicon(rng)
    return [example(rng, lex, zh=rng.random() < 0.45) for _ in range(count)]


if __name__ == "__main__":
    for row in generate(30, 1):
        print(row["lang"], row["class"], row["ends"], row["text"], [row["text"][s:e] + ":" + t for t, s, e in row["spans"]])


# --- real chat without a slot: the negatives templates cannot give ------------------------------
# Sentences users really type, from two public chat sources, kept only where no word of CUES occurs —
# so none states an employer, title, home, partner, family member, pet, like, dislike or plan, and each
# is labelled "other" with no span. Without them the model had seen only sentences that state
# something and read a slot into most real chat (bench/RESULTS.md, issue 35: 1,676 profile items
# predicted on LoCoMo 0-4 for 131 gold). Sources (../shared/data/SOURCES.md):
# - "longmemeval-filler": user turns of LongMemEval-S haystack sessions that hold no evidence
#   (not in `answer_session_ids`, no turn with `has_answer`), English, MIT;
# - "memorybank-cn": user turns of MemoryBank's Chinese chat logs, MIT.
# LoCoMo (the profile check) and the fresh supersede sets are never read.
CUES = re.compile(
    r"\b(?:work|works|worked|working|job|jobs|career|employ\w*|company|office|boss|hired|fired|quit|resign\w*|"
    r"retir\w*|promot\w*|intern\w*|live|lives|lived|living|moved?|moving|relocat\w*|home|house|apartment|city|"
    r"born|grew up|from|married|wife|husband|partner|boyfriend|girlfriend|dating|engaged|divorc\w*|broke up|"
    r"single|family|mom|mum|mother|dad|father|parents?|sister|brother|son|daughter|kids?|children|aunt|uncle|"
    r"cousin|grand\w+|dog|cat|puppy|kitten|pet|like|likes|liked|love|loves|loved|enjoy\w*|prefer\w*|favou?rite|"
    r"fan|into|hate|hates|can't stand|dislike\w*|plan\w*|going to|will|want|wants|hope|hoping|thinking of|"
    r"trip|visit\w*|next|someday|student|teacher|engineer|nurse|doctor|manager|designer)\b"
    r"|工作|上班|公司|老板|辞职|离职|跳槽|入职|升职|转行|退休|住|搬|家|老家|出生|结婚|老公|老婆|丈夫|妻子|"
    r"男朋友|女朋友|对象|分手|离婚|单身|爸|妈|父母|姐|妹|哥|弟|儿子|女儿|孩子|奶奶|爷爷|狗|猫|宠物|喜欢|爱|"
    r"讨厌|不喜欢|最爱|打算|计划|想|准备|要去|旅游|下周|明年|学生|老师|工程师|护士|医生|经理",
    re.I)
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")


def real_negatives(rng: random.Random, lex: Lexicon) -> list[dict]:
    """Sentences of real chat that state no slot, as training rows (class "other", no spans)."""
    data = ROOT.parent / "shared" / "data"
    found = []
    for path in sorted((data / "longmemeval_s_dev").glob("*.json")):
        item = json.loads(path.read_text())
        for sid, session in zip(item["haystack_session_ids"], item["haystack_sessions"]):
            if sid in item["answer_session_ids"] or any(t.get("has_answer") for t in session):
                continue
            found += [("en", "longmemeval-filler", t["content"]) for t in session if t["role"] == "user"]
    bank = json.loads((data / "zh" / "memorybank_cn" / "memory_bank_cn.json").read_text())
    found += [("zh", "memorybank-cn", turn["query"]) for user in bank.values()
              for day in user["history"].values() for turn in day]
    rows, seen = [], set()
    for lang, source, turn in found:
        for sentence in _SENTENCE.findall(turn[:2000]):
            sentence = sentence.strip()
            if not 12 <= len(sentence) <= 200 or sentence in seen or CUES.search(sentence):
                continue
            seen.add(sentence)
            subject = ""
            if lang == "en" and rng.random() < 0.5 and re.search(r"\bI\b", sentence):  # the extractor's third person
                subject = rng.choice(lex.names)
                for short, full in (("I'm", "is"), ("I've", "has"), ("I'd", "would"), ("I'll", "will")):
                    sentence = re.sub(rf"\b{short}\b", f"{subject} {full}", sentence)
                sentence = re.sub(r"\bI\b", subject, sentence)
                sentence = re.sub(r"\b[Mm]y\b", rng.choice(["their", "his", "her"]), sentence)
            rows.append({"text": sentence, "subject": subject, "class": "other", "spans": [], "ends": [],
                         "lang": lang, "source": source})
    rng.shuffle(rows)
    return rows
