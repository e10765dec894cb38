"""Profile items from statements, by rule (English and Chinese): what a fact says about a person.

Pure functions, no database: `items_in(text, speaker, names)` reads one fact (first person "I"/"我"
is its speaker; a named participant is themselves), `interests_in` the recurring-interest topics it
touches. conversations/profiles.py folds them into stored profiles; bench/profiles.py scores them.
"""

import re
from dataclasses import dataclass

from conversations.statements import normalise, read

# Categories holding one value at a time: a newer value supersedes the older ("moved to Shanghai"
# replaces "lives in Beijing"). The others accumulate (two pets, many likes).
SINGLE_VALUED = ("name", "location", "occupation")
# A like and a dislike of the same thing contradict each other: the newer wins.
OPPOSITES = {"preference": "dislike", "dislike": "preference"}
MAX_VALUE_WORDS = 6
# A like or a goal whose object is a clause ("how it shows…", "that Melanie chose…") names no thing.
# A goal worth a profile names a step in someone's life ("adopt kids", "open a dance studio"); the
# rest of what people "want to" do in a chat is a wish of the moment ("help people", "make that
# happen", "join in"): those were most of the rules' wrong items on LoCoMo 0-1 (bench/profiles.py).
_GOAL_VERBS = re.compile(
    r"^(?:adopt|become|open|start|buy|move|learn|study|build|write|publish|travel|visit|get|finish|launch|own|run|"
    r"go|return|pursue|train|compete|apply|graduate|retire|marry|teach|perform|record|release|save|try|take|have|"
    r"earn|complete|climb|hike|see|enter|expand|grow|sell|improve|work on|"
    r"create (?:an?|their|my|his|her) (?!safe))(?:s|es)?\b", re.I)
# A habit's verb is an action, not "is", "has", "feels" (those are states, read by other rules).
_NOT_HABIT = re.compile(r"^(?:is|am|are|was|were|has|have|had|feels?|seems?|gets?|does)\b", re.I)
# A like of doing something in general ("helping people", "creating a safe place", "finding new trends",
# "running their own studio") is a value or a task, not a thing someone likes: wrong items on LoCoMo 0-1.
_TASK = re.compile(r"^(?:helping|creating|making|finding|running|spreading|being|getting|having|seeing|doing|giving|"
                   r"sharing|supporting|building|working|starting|keeping|showing|bringing|taking|spending|improving)\s+\S", re.I)
_VAGUE = re.compile(r"^(?:how|that|what|when|where|why|it|its|this|these|those|both|all|see|make|being)\b|"
                    r"^the (?:freedom|feeling|idea|support|vibes?|energy|atmosphere|moments?|chance|opportunity|"
                    r"experience|process|journey|challenge|self[ -]\w+|way|fact|thought|positivity|peace)\b|"
                    r"^\w+ (?:it|that|this|them|a shot)\b", re.I)

# Kin words as people say them ("auntie", "grandkids", "stepdad"): the value keeps the word said.
_FAMILY = (r"husband|wife|partner|boyfriend|girlfriend|fianc[eé]e?|son|sons|daughter|daughters|kids|children|"
           r"mom|mum|mother|dad|father|parents|sister|sisters|brother|brothers|grandma|grandmother|grandpa|"
           r"grandfather|grandparents|grandkids|grandchildren|grandson|granddaughter|cousins?|aunt|aunts|auntie|aunty|"
           r"uncles?|nieces?|nephews?|stepmom|stepmother|stepdad|stepfather|stepson|stepdaughter|in-laws|"
           r"mother-in-law|father-in-law|twins|family")
# A pet word naming a picture of one ("Melanie's horse painting") is no pet.
_NOT_PET = r"(?! (?:painting|drawing|photo|picture|pic|figurine|toy|food|bed|show|riding|sitter|print|shirt|mug|statue|" \
           r"sculpture|portrait|costume|treats?|video|sticker|poster|lover|person)\b)"
_PETS = r"dog|dogs|cat|cats|puppy|puppies|kitten|pup|bird|parrot|hamster|rabbit|bunny|fish|turtle|horse|guinea pig"
_OWNED = (r"car|house|home|bike|bicycle|motorcycle|guitar|piano|violin|camera|laptop|boat|apartment|condo|"
          r"telescope|kayak|tent|van|truck|garden|studio|bakery|shop|store|business")
_BUSINESS = r"store|shop|studio|bakery|business|company|restaurant|cafe|café|salon|startup|clinic|gym|boutique"
_JOBS = (r"teacher|nurse|doctor|engineer|developer|programmer|designer|artist|painter|writer|author|musician|"
         r"singer|chef|baker|lawyer|accountant|counselor|counsellor|therapist|student|scientist|researcher|"
         r"manager|consultant|photographer|firefighter|police officer|officer|pilot|dancer|coach|trainer|"
         r"veterinarian|vet|mechanic|carpenter|farmer|entrepreneur|ceo|founder|volunteer|mom|dad|parent")
# Adverbs of an update between the subject and its verb ("I now work at…", "I just moved to…").
_NOW = r"(?:(?:now|currently|still|just|recently|finally|already|officially) )*"
# An employer by name ("Door Dash") or by kind ("the mechanical engineering company", "a tech company").
_EMPLOYER = (r"(?:(?:the )?[A-Z][\w&-]+(?: [A-Z][\w&-]+){0,3}|(?:the |a |an )(?:[\w-]+ ){0,3}?(?:company|firm|agency|"
             r"startup|bank|hospital|clinic|school|university|college|factory|plant|lab|nonprofit|charity|"
             r"restaurant|hotel|store|shop|studio))")
# Things owned that a purchase names ("bought a cross necklace"), up to where the phrase goes on.
_BOUGHT = r"(?P<v>(?:[\w-]+ ){0,2}?[\w-]+?)(?=\s(?:to|for|at|from|in|on|yesterday|last|this|today|and|which|that)\b|[.,!?;:()]|$| -)"
_HABIT = (r"(?:every (?:single )?(?:morning|day|night|evening|afternoon|week|weekend|monday|tuesday|wednesday|thursday|"
          r"friday|saturday|sunday)|each (?:morning|day|night|evening|week)|daily|on weekends)")
_END = r"(?=$|[.,!?;:()]|\s(?:and|but|because|so|which|who|since|when|with|to help|for)\b|\s-)"
_VALUE = r"(?P<v>[^.,!?;:()]{2,60}?)" + _END


@dataclass(frozen=True)
class RuleItem:
    subject: str
    category: str
    value: str

    @property
    def key(self) -> str:
        return re.sub(r"[\W_]+", " ", self.value.lower()).strip()


def _who(names: list[str]) -> str:
    alternatives = [re.escape(n) for n in sorted({*names, *(n.split()[0] for n in names if n)}, key=len, reverse=True)
                    if n]
    return r"(?P<who>I|" + "|".join(alternatives) + r")" if alternatives else r"(?P<who>I)"


def _pos(names: list[str]) -> str:
    alternatives = [re.escape(n) + r"['’]s" for n in sorted({*names, *(n.split()[0] for n in names if n)},
                                                             key=len, reverse=True) if n]
    # "their"/"his"/"her": the extractor writes "Melanie is lucky to have their husband" for "my husband".
    return r"(?P<who>[Mm]y|[Tt]heir|[Hh]is|[Hh]er|" + "|".join(alternatives) + r")"


def _english_rules(names: list[str]) -> list[tuple[str, re.Pattern]]:
    w, p = _who(names), _pos(names)
    be = r"(?:\s(?:is|am|was|has been|have been)|\s?['’]m)"
    rules = [
        ("name", rf"\b{p} name is (?P<v>[A-Z][\w-]+(?: [A-Z][\w-]+)?)"),
        ("location", rf"\b{w} {_NOW}(?:lives?|living|am living|is living|resides?) in "
                     rf"(?P<v>(?:the )?[A-Z][\w-]+(?:,? [A-Z][\w-]+){{0,2}})"),
        ("location", rf"\b{w} {_NOW}(?:moved|relocated|am moving|is moving|'m moving|"
                     rf"have moved|has moved) to (?P<v>(?:the )?[A-Z][\w-]+(?:,? [A-Z][\w-]+){{0,2}})"),
        ("origin", rf"\b{p} (?:home ?country|home ?town|native country|birthplace),? (?:is )?"
                   rf"(?P<v>[A-Z][\w-]+(?: [A-Z][\w-]+)?)"),
        ("origin", rf"\b{w}{be} (?:originally )?from (?P<v>(?:the )?[A-Z][\w-]+(?: [A-Z][\w-]+)?)"),
        ("origin", rf"\b{w} (?:grew up|was born) in (?P<v>(?:the )?[A-Z][\w-]+(?: [A-Z][\w-]+)?)"),
        ("origin", rf"\b{w} moved from (?P<v>(?:the )?[A-Z][\w-]+(?: [A-Z][\w-]+)?)"),
        ("occupation", rf"\b{w} (?:works?|am working|is working|worked) as (?:an? )?{_VALUE}"),
        ("occupation", rf"\b{w}{be} (?:now )?(?:an? |the )(?P<v>(?:[\w-]+ )?(?:{_JOBS}))\b"),
        ("occupation", rf"\b{p} (?:job|career|work|profession) (?:is|as) (?:an? )?{_VALUE}"),
        ("occupation", rf"\b{w} {_NOW}(?:works?|am working|is working|started working|began working) (?:at|for) "
                       rf"(?P<v>{_EMPLOYER})"),
        # An employer named with the job, also a lost one ("lost their job at Door Dash"): the last job known.
        ("occupation", rf"\b{p} (?:old |former |previous |new |first )?(?:job|position|role) (?:at|with) "
                       rf"(?P<v>{_EMPLOYER})"),
        # A business someone opens or runs is their work ("Gina opened an online clothing store").
        ("occupation", rf"\b{w}{be}? {_NOW}(?:opened|started|launched|runs?|owns?|running|opening|starting|launching) "
                       rf"(?:a |an |my |their |his |her )?(?:own )?(?:new )?(?P<v>(?:[\w-]+ ){{0,2}}(?:{_BUSINESS}))\b"),
        ("possession", rf"\b{p} (?:own |new |little )?(?:[\w-]+ ){{0,2}}(?P<v>(?!business|company|startup)(?:{_BUSINESS}))"
                       rf"\b(?!['’])"),
        ("occupation", rf"\b{w} {_NOW}(?:may have |might have |has |have )?(?:got|gotten|landed|started|took|accepted|"
                       rf"began|found) (?:a |an |my |their |his |her )?(?:new )?(?:job|position|role) (?:at|with) "
                       rf"(?P<v>{_EMPLOYER})"),
        # A trip ahead ("I'm going to Japan next month"): a goal with a place, the window is foresight's.
        ("goal", rf"\b{w}{be} {_NOW}(?:going|travell?ing|flying|heading) (?:back )?to "
                 rf"(?P<v>[A-Z][\w-]+(?: [A-Z][\w-]+)?)"),
        ("goal", rf"\b{w}{be}? {_NOW}(?:planning|planned|booked|taking) (?:a |an |my |their )?(?:\w+ )?"
                 rf"(?P<v>(?:trip|vacation|holiday|visit) to [A-Z][\w-]+(?: [A-Z][\w-]+)?)"),
        # A habit ("I walk Mochi every morning"): what someone does regularly, as they said it.
        ("habit", rf"\b{w} (?:usually |always |often )?(?P<v>[a-z]+s? (?:[\w'-]+ ){{0,5}}?{_HABIT})\b"),
        # A relative named in passing ("my son Kyle", "their sister Anna"): the name goes with the word.
        ("family", rf"\b{p} (?P<v>(?:{_FAMILY})(?: (?!I\b|I['’])[A-Z][a-z]+)?)\b(?!-\w)"),
        # "a picnic with the wife and kids": "the" wife is the speaker's own (not "the kids", often others').
        ("family", rf"\b{w} (?:[\w'’-]+ ){{0,8}}?with the (?P<v>wife|husband|missus|hubby)\b"),
        ("family", rf"\b{w} (?:[\w'’-]+ ){{0,8}}?with the (?:wife|husband|missus|hubby) and (?:the )?"
                   rf"(?P<v>kids|children)\b"),
        # Friends of a community ("friends from church", "their church friends").
        ("family", rf"\b{w} (?:[\w'’-]+ ){{0,8}}?with (?:some |a few |my |their |his |her )?"
                   rf"(?P<v>friends from (?:church|work|school|college|the gym|the team)|"
                   rf"(?:church|work|school|college|gym|team) friends)\b"),
        ("family", rf"\b{p} (?:{_FAMILY}) and (?:my |their |his |her )?(?P<v>(?:{_FAMILY}))\b"),
        ("family", rf"\b{w}{be} (?P<v>married|engaged|divorced|single|a (?:mom|mother|dad|father|parent))\b"),
        ("family", rf"\b{w}{be}? (?:got |are |were )?(?:happily )?(?P<v>married)\b"),
        ("family", rf"\b(?:[Mm]arrying|[Mm]arried to) {p} (?:partner|husband|wife|fianc[eé]e?)\b(?P<v>)"),
        ("family", rf"\b{w} (?:has|have) (?P<v>(?:a|an|one|two|three|four|\d) (?:{_FAMILY}))\b"),
        ("pet", rf"\b{p} (?:new |pet |little |two |three )?(?P<v>(?:{_PETS})(?:,? (?:named |called )?[A-Z][a-z]+)?)\b{_NOT_PET}"),
        # "we got another cat named Bailey": the speaker's household.
        ("pet", rf"\b(?:{w}|(?P<we>[Ww]e)) (?:also |just )?(?:has|have|got|adopted|am adopting|is adopting) "
                rf"(?:a |an |two |three |another )?(?:new |pet )?"
                rf"(?P<v>(?:{_PETS})(?: (?:named|called) [A-Z][a-z]+)?)\b{_NOT_PET}"),
        ("possession", rf"\b{w} (?:just )?(?:bought|got|owns?|has|have) (?:a |an |my |her |his )?(?:new |own )?"
                       rf"(?P<v>(?:[\w-]+ )?(?:{_OWNED}))\b"),
        # A purchase said in passing ("Maria bought a cross necklace to…", "these figurines Melanie bought").
        ("possession", rf"\b{w} (?:just |recently |finally )?bought (?:a |an |some |two |three |a pair of )(?:new )?"
                       rf"{_BOUGHT}"),
        ("possession", rf"\b(?:[Tt]hese|[Tt]hose|[Tt]his|[Tt]he) (?P<v>(?:[\w-]+ )?[\w-]+) {w} (?:just |recently )?"
                       rf"bought\b"),
        ("possession", rf"\b{p} (?:own |new |little )?(?P<v>(?:[\w-]+ )?librar(?:y|ies))\b"),
        ("dislike", rf"\b{w} (?:really )?(?:hates?|dislikes?|can't stand|cannot stand|don't like|doesn't like|"
                    rf"does not like|do not like|am not a fan of|is not a fan of|detests?) {_VALUE}"),
        ("preference", rf"\b{w} (?:really |absolutely |just |also )?(?:loved?|loves|liked?|likes|enjoy(?:s|ed)?|adored?|adores|"
                       rf"(?:is|am|was) (?:really )?(?:into|passionate about|a (?:big |huge )?fan of|fond of|"
                       rf"keen on)) {_VALUE}"),
        ("preference", rf"\b{p} favou?rite (?P<v>[\w ]{{2,30}}? (?:is|are) [^.,!?;]{{2,40}}?){_END}"),
        # A favourite said in passing ("Maria's favorite is the banana split sundae").
        ("preference", rf"\b{p} (?:all-time |absolute |personal |very )?favou?rites? (?:is|are|was|has to be|would be) "
                       rf"(?:the |a |an |definitely |probably )*(?:amazing |classic |good old )?{_VALUE}"),
        ("preference", rf"\b{w}(?:['’]ve| has| have)? (?:always )?(?:had|has|have|got) a (?:real |deep |huge |big |special )?"
                       rf"(?:love|passion|soft spot|thing) for {_VALUE}"),
        ("goal", rf"\b{w} (?:really )?(?:wants?|hopes?|dreams? of|plans?|wish(?:es)?|would love|'d love|"
                 rf"am hoping|is hoping|aims?|am determined|is determined) to {_VALUE}"),
        ("goal", rf"\b{p} (?:goal|dream|aim|plan) is to {_VALUE}"),
        ("goal", rf"\b{w} wanna {_VALUE}"),
        # A step being weighed ("We're considering adopting a rescue dog"): the speaker's household.
        ("goal", rf"\b(?:{w}{be}?|(?P<we>[Ww]e)(?:['’]re| are)) (?:also |really |seriously |now )?(?:considering|"
                 rf"thinking (?:about|of)|planning on) (?P<v>[a-z]+ing\b[^.,!?;:()]{{0,50}}?){_END}"),
        ("goal", rf"\bmade {w} (?:even |so |really )*(?:more )?(?:determined|eager|want) to {_VALUE}"),
        # "It's been a dream to adopt": the speaker's (no one else is named).
        ("goal", rf"^(?P<who>)(?:[Ii]t['’]s|[Ii]t has|[Ii]t is|[Ii]t was) (?:been )?(?:a |my |their )?(?:lifelong |big )?"
                 rf"dream to {_VALUE}"),
        # A career someone looks into ("looking into counseling and mental health as a career").
        ("career", rf"\b{w}{be}? (?:\w+ ){{0,3}}?(?:looking into|considering|exploring|pursuing|thinking about) "
                 rf"(?P<v>[\w ]{{2,40}}?) (?:as a career|career options|careers?|jobs)\b"),
    ]
    return [(c, re.compile(r)) for c, r in rules]


_ZH_KIN = ("老公|老婆|丈夫|妻子|儿子|女儿|孩子们?|妈妈|爸爸|母亲|父亲|姐姐|妹妹|哥哥|弟弟|爷爷|奶奶|外婆|外公|姥姥|姥爷|"
           "阿姨|姑姑|姨妈|舅舅|叔叔|伯伯|表哥|表姐|表弟|表妹|堂哥|堂姐|堂弟|堂妹|侄子|侄女|外甥|外甥女|孙子|孙女|公公|婆婆|岳父|岳母")
_ZH_RULES = [
    ("name", re.compile(r"我(?:叫|的名字是)(?P<v>[\u4e00-\u9fff]{2,4})")),
    ("location", re.compile(r"我(?:现在|目前)?(?:住在|生活在|定居在?)(?P<v>[\u4e00-\u9fff]{2,8}?)(?:[，。！,.!的了]|$)")),
    ("location", re.compile(r"我(?:已经|刚|最近)?搬(?:到|去)了?(?P<v>[\u4e00-\u9fff]{2,8}?)(?:[，。！,.!了住]|$)")),
    ("origin", re.compile(r"我(?:来自|是)(?P<v>[\u4e00-\u9fff]{2,6}?)人(?:[，。！,.!]|$)")),
    ("occupation", re.compile(r"我是(?:一名|一个|一位)(?P<v>[\u4e00-\u9fff]{2,8}?)(?:[，。！,.!]|$)")),
    ("occupation", re.compile(r"我(?:现在|目前|已经)?(?:换到了?|跳槽到了?|入职了?)(?P<v>[\u4e00-\u9fff\w]{2,12}?)"
                              r"(?:工作|上班|公司)?(?:了)?(?:[，。！,.!]|$)")),
    ("occupation", re.compile(r"我(?:现在|目前|已经)?(?:在(?P<v>[\u4e00-\u9fff\w]{2,12}?)工作)")),
    ("occupation", re.compile(r"我的(?:工作|职业)是(?P<v>[\u4e00-\u9fff]{2,8}?)(?:[，。！,.!]|$)")),
    # Kin words as said, a name after 叫 going with the word ("我儿子叫小凯" → "儿子小凯"); "我和老婆孩子…".
    ("family", re.compile(rf"我(?:的)?(?P<v>(?:{_ZH_KIN})(?:叫[\u4e00-\u9fff]{{2,3}}(?=[，。！,.!了]|$))?)")),
    ("family", re.compile(rf"我(?:和|跟|带着?)(?P<v>{_ZH_KIN})")),
    ("family", re.compile(rf"我(?:和|跟|带着?)(?:{_ZH_KIN})(?:和|跟)?(?P<v>{_ZH_KIN})")),
    ("family", re.compile(r"我(?:和|跟)(?:几个|一些)?(?P<v>(?:教会|教堂|公司|单位|学校|大学|球队)(?:的|里的)?(?:朋友|同事))")),
    ("pet", re.compile(r"我(?:家)?(?:的|养了|养的)(?:一只|一条|两只)?(?P<v>小?(?:狗|猫|兔子|鹦鹉|仓鼠|金鱼))")),
    ("possession", re.compile(r"我(?:刚|昨天|上周|最近)?买了(?:一辆|一台|一套|一个|一把|一条|一件|一双|一本|一只|几个|一些)(?:新)?"
                              r"(?P<v>[\u4e00-\u9fff]{1,6}?)(?:[，。！,.!]|$|来|去|给|想|让)")),
    ("dislike", re.compile(r"我(?:很|非常|特别)?(?:不喜欢|讨厌|受不了)(?P<v>[\u4e00-\u9fff\w]{1,10}?)(?:[，。！,.!]|$)")),
    ("preference", re.compile(r"我(?:很|非常|特别|最)?(?:喜欢|热爱|爱)(?!的)(?P<v>[\u4e00-\u9fff\w]{1,10}?)(?:[，。！,.!]|$)")),
    # A favourite said in passing ("我最喜欢的是香蕉船", "我最爱的甜点是…"); a love for something ("我对马情有独钟").
    ("preference", re.compile(r"我最(?:喜欢|爱)的(?:[\u4e00-\u9fff]{1,4})?(?:是|就是|还是)(?P<v>[\u4e00-\u9fff\w]{1,12}?)"
                              r"(?:[，。！,.!]|$)")),
    ("preference", re.compile(r"我(?:一直|从小)?(?:就|都)?对(?P<v>[\u4e00-\u9fff\w]{1,10}?)(?:情有独钟|特别着迷|很着迷|着迷)")),
    ("goal", re.compile(r"我(?:下个?月|下周|明年|今年|这个?周末|月底|年底)?(?:打算|计划|准备|要)(?P<v>去[\u4e00-\u9fff\w]{2,8}?"
                        r"(?:旅行|旅游|玩|出差|度假))(?:[，。！,.!]|$)")),
    ("habit", re.compile(r"我(?P<v>(?:每天|每晚|每周[一二三四五六日天]?|每个周末|周末|平时)(?:早上|晚上|下午)?(?:都|经常|总是)?(?:要|会)?"
                         r"[\u4e00-\u9fff\w]{2,16}?)(?:[，。！,.!]|$)")),
    ("goal", re.compile(r"我的(?:目标|梦想)是(?P<v>[\u4e00-\u9fff\w]{2,16}?)(?:[，。！,.!]|$)")),
    # A step being weighed ("我们在考虑领养一只救助犬").
    ("goal", re.compile(r"我(?:们)?(?:正在|在|一直在)?(?:考虑|想着)(?P<v>(?:领养|收养|买|搬到?|开|学|换|创办|改善)"
                        r"[\u4e00-\u9fff\w]{1,12}?)(?:[，。！,.!]|$)")),
    ("goal", re.compile(r"我(?:希望|梦想|想要)(?:将来|以后)?(?P<v>[\u4e00-\u9fff\w]{2,16}?)(?:[，。！,.!]|$)")),
]

# Recurring interests: topics whose words recur across a person's facts (a cluster by topic term).
# English words start at a word boundary ("sing" is not in "expressing", "single" or "promising": on
# LoCoMo 0-1 those made "music" an interest of everyone); a "camping trip" is camping, not travel;
# "running their own studio" is not running. Plain alternations with (?:^|[^a-z]) and lookaheads, no
# \b (PostgreSQL's regex reads it as a backspace): the same text is a database iregex.
_INTEREST_WORDS = {
    "painting": (r"paint(?:s|ed|ing|ings)?|canvas(?:es)?|watercolou?rs?", "画画|绘画|油画"),
    "pottery": (r"pottery|ceramics?|clay", "陶艺"),
    "music": (r"music(?:al|ian|ians)?|guitars?|violins?|pianos?|sing|sings|singing|songs?|concerts?", "音乐|吉他|钢琴|唱歌"),
    "reading": (r"reading|books?|novels?", "读书|看书|小说"),
    "running": (r"running(?! (?:a|an|the|my|his|her|their|our|this|that|[a-z]+['’]s|out|late|low)[^a-z])|runs? (?:a|the) "
                r"(?:race|marathon|[0-9]+k)|marathons?|jog(?:s|ged|ging)?", "跑步|马拉松"),
    "hiking": (r"hik(?:e|es|ed|ing)|trails?", "徒步|爬山"),
    "camping": (r"camping|campfires?|campsites?", "露营"),
    "swimming": (r"swim(?:s|ming)?|swam", "游泳"),
    "photography": (r"photograph(?:y|s|ing)?|cameras?", "摄影|拍照"),
    "cooking": (r"cook(?:s|ed|ing)?|bak(?:e|es|ed|ing)|recipes?", "烹饪|做饭|烘焙"),
    "travel": (r"travel(?:s|l?ed|l?ing)?|vacations?|abroad", "旅行|旅游"),
    "gardening": (r"garden(?:s|ing)?|flowers?|plants?", "园艺|种花"),
    "yoga": (r"yoga|meditat(?:e|es|ed|ing|ion)", "瑜伽|冥想"),
    "dance": (r"danc(?:e|es|ed|er|ers|ing)", "跳舞|舞蹈"),
    "sports": (r"soccer|football|basketball|tennis|baseball|volleyball", "足球|篮球|网球"),
    "gaming": (r"video games?|gaming", "游戏"),
    "volunteering": (r"volunteer(?:s|ing|ed)?|charity", "志愿"),
    "activism": (r"lgbtq|advoca(?:cy|te|tes|ting)|activis[mt]s?|pride", ""),
    "art": (r"art shows?|artworks?|art class(?:es)?|sculpt(?:ure|ures|ing)|drawings?", "艺术"),
    "writing": (r"writ(?:e|es|ing)|poetry|poems?", "写作|诗"),
}
INTERESTS = {label: rf"(?:^|[^a-z])(?:{english})(?![a-z])" + (f"|{chinese}" if chinese else "")
             for label, (english, chinese) in _INTEREST_WORDS.items()}
_INTEREST_PATTERNS = {label: re.compile(rf"(?:{words})", re.I) for label, words in INTERESTS.items()}


def clean(text: str) -> str:
    """The statement the fact makes: without the "X asked: …?" it carries and the date stamp it ends with."""
    text = re.sub(r"^\s*[\w .'-]{1,40} asked: [^?]*\?\s*", "", text)
    text = re.sub(r"^\s*[\w .'-]{1,40}: ", "", text) if re.match(r"^\s*[\w .'-]{1,40}: ", text) else text
    return re.sub(r"\s*[（(][^()（）]*\d{4}[^()（）]*[)）]", "", text).strip()


# Who reads a statement for its profile items (issue 35; bench/profiles.py --reader, bench/RESULTS.md):
# "rules": these rules alone; "model": the statement model (conversations/statements.py) for the
# categories it tags, these rules for the rest (name, possession, habit); "union": both. Measured on the
# held-out LoCoMo conversations 3-4: rules P/R 0.512/0.406, model 0.239/0.266, union 0.320/0.422 —
# the model trained on templates reads fewer profile items in real chat than the rules, so they stay.
READER = "rules"
MODEL_CATEGORIES = {"title": "occupation", "employer": "occupation", "location": "location", "origin": "origin",
                    "family": "family", "partner": "family", "pet": "pet", "like": "preference",
                    "dislike": "dislike", "plan": "goal"}


def items_in(text: str, speaker: str, names: list[str], reader: str = "") -> list[RuleItem]:
    """The profile items one statement states, each about the person it names (or its speaker)."""
    reader = reader or READER
    if reader == "rules":
        return rule_items(text, speaker, names)
    rules = rule_items(text, speaker, names)
    if reader == "model":
        rules = [i for i in rules if i.category not in set(MODEL_CATEGORIES.values())]
    return _distinct(model_items(text, speaker) + rules)


def model_items(text: str, speaker: str) -> list[RuleItem]:
    """The items the statement model reads for the speaker: a job with its employer is one occupation
    ("machine learning engineer at Fabrikam"), so a new job replaces title and employer together."""
    if not speaker:
        return []
    statement = read(clean(text), speaker)
    current = [s for s in statement.slots if not s.ended]
    titles = [s.value for s in current if s.type == "title"]
    employers = [s.value for s in current if s.type == "employer"]
    found = []
    if titles or employers:
        title = re.sub(r"^(?:an?|the|their|his|her|my)\s+", "", titles[0], flags=re.I) if titles else ""
        found.append(RuleItem(speaker, "occupation", f"{title} at {employers[0]}" if title and employers
                              else title or employers[0]))
    for slot in current:
        category = MODEL_CATEGORIES[slot.type]
        if category == "occupation":
            continue
        value = normalise(slot.value) if category in ("family", "pet") and slot.type != "partner" else slot.value
        if slot.type == "partner":
            value = f"partner {slot.value}"
        if value:
            found.append(RuleItem(speaker, category, _trim(value, MAX_VALUE_WORDS)))
    return found


def rule_items(text: str, speaker: str, names: list[str]) -> list[RuleItem]:
    """The profile items the rules read in one statement, each about the person it names (or its speaker)."""
    text = clean(text)
    found: list[RuleItem] = []
    if re.search(r"[\u4e00-\u9fff]", text):
        # The extractor writes the speaker's name for 我 ("李雷住在北京"): read each named person as 我.
        readings = [(speaker, text)] + [(n, text.replace(n, "我")) for n in {speaker, *names} if n and n in text]
        for subject, reading in readings:
            for category, pattern in _ZH_RULES:
                for m in pattern.finditer(reading):
                    value = m.group("v").strip()
                    found.append(RuleItem(subject, category, value.replace("叫", "") if category == "family" else value))
        return _distinct(found)
    for category, pattern in _rules_for(tuple(sorted({speaker, *names} - {""}))):
        for m in pattern.finditer(text):
            who = m.group("who") or ("I" if m.groupdict().get("we") or m.group("who") == "" else "")
            if who.lower() in ("i", "my"):
                subject = speaker
            elif who.lower() in ("their", "his", "her"):
                # The rewrite writes "their" after the speaker's name ("Melanie is lucky to have their
                # husband"); with no one named before it, "their" is someone else's ("their brother would
                # be OK", said of the kids).
                subject = _last_named(text[:m.start()], names or [speaker])
            else:
                subject = _full_name(who.removesuffix("'s").removesuffix("’s"), names or [speaker])
            value = _trim(m.group("v"), 12 if category == "habit" else MAX_VALUE_WORDS)
            if category == "career":  # a goal, though its value names a field, not a step ("adopt")
                category, value = "goal", f"a career in {value}"
            if category == "family" and not value:
                value = "married"  # "marrying Melanie's partner"
            if category in ("preference", "dislike") and _TASK.match(value):
                continue
            if category in ("preference", "dislike"):
                value = _topic(value)
            if category in ("preference", "dislike", "goal") and _VAGUE.match(value):
                continue
            if category == "goal" and not value[:1].isupper() and not _GOAL_VERBS.match(_base(value)) \
                    and not value.startswith("a career in "):
                continue
            if category == "habit" and _NOT_HABIT.match(value):
                continue
            if category == "goal" and value[:1].isupper():
                value = f"travel to {value}"  # a trip's place: "wants to travel to Japan"
            if category == "family" and value.lower() == "family":
                continue  # "my family" says nothing about who is in it
            if subject and value:
                found.append(RuleItem(subject, category, value))
    return _distinct(found)


def _base(value: str) -> str:
    """The phrase with its first verb's -ing undone ("adopting a dog" → "adopt a dog"), for the goal-verb check."""
    first, _, rest = value.partition(" ")
    if not first.endswith("ing") or len(first) < 6:
        return value
    stem = first[:-3]
    for base in (stem, stem + "e", stem[:-1] if len(stem) > 2 and stem[-1] == stem[-2] else stem):
        if _GOAL_VERBS.match(f"{base} {rest}".strip()):
            return f"{base} {rest}".strip()
    return value


def _topic(value: str) -> str:
    """A like of one word that is an interest topic is that topic ("dancing" is "dance"): one item, not two."""
    if " " in value:
        return value
    labels = [label for label, pattern in _INTEREST_PATTERNS.items() if pattern.fullmatch(value.lower())]
    return labels[0] if len(labels) == 1 else value


def interests_in(text: str, subject: str = "", names: list[str] | tuple = ()) -> list[str]:
    """The interest topics a fact touches for its subject. A fact that names another participant ("Caroline
    loves that Melanie chose pottery", "glad Melanie had a blast at the concert") is about them too: it
    counts for nobody (on LoCoMo 0-1 such facts made half the wrong interests)."""
    text = clean(text)
    others = {n.split()[0] for n in names if n and n != subject and n.split()[0] != subject.split(" ")[0]}
    if any(_names(o, text) for o in others):
        return []
    return [label for label, pattern in _INTEREST_PATTERNS.items() if pattern.search(text)]


def _names(name: str, text: str) -> bool:
    """Whether the text names the person: a whole word in English ("Jon" is not in "Jonathan"), anywhere in Chinese."""
    if re.search(r"[\u4e00-\u9fff]", name):
        return name in text
    return re.search(rf"(?<![^\W\d_]){re.escape(name)}(?![^\W\d_])", text) is not None


_cache: dict[tuple, list] = {}


def _rules_for(names: tuple[str, ...]):
    if names not in _cache:
        if len(_cache) > 256:
            _cache.clear()
        _cache[names] = _english_rules(list(names))
    return _cache[names]


def _last_named(before: str, names: list[str]) -> str:
    """The participant named last before a possessive pronoun: whose "their husband" it is."""
    spots = [(before.rfind(n.split()[0]), n) for n in names if n and n.split()[0] in before]
    return max(spots)[1] if spots else ""


def _full_name(who: str, names: list[str]) -> str:
    return next((n for n in names if n == who or n.split()[0] == who), who)


def _trim(value: str, most: int = MAX_VALUE_WORDS) -> str:
    words = value.strip(" '\"-").split()
    while words and words[-1].lower() in ("the", "a", "an", "to", "of", "my", "and", "so", "really", "very"):
        words.pop()
    return " ".join(words[:most])


def _distinct(items: list[RuleItem]) -> list[RuleItem]:
    seen, out = set(), []
    for item in items:
        if (item.subject, item.category, item.key) not in seen:
            seen.add((item.subject, item.category, item.key))
            out.append(item)
    return out
