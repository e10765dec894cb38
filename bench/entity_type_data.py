"""Templated training mentions for the entity typer (entities/typing_model.py), English and Chinese.

Every sentence here is *generated* (source "templated"): templates written for this purpose, with
slots filled from the repository's own lexicons — entities/data (US Census given names, MIT;
GeoNames places, CC BY 4.0), the company generators and word lists of bench/statement_data.py — and
word lists composed here (surnames, work-title patterns, events, products, demonyms, breeds, dishes).
Nothing is read from bench/entities_gold.json, LoCoMo or any other labelled set: those are the checks.

A template holds slots `{person}`, `{place}`, `{org}`, `{work}`, `{other}` or `{any}` (any of the five,
for a context that does not tell), and sub-kinds that say what fills them (`{team}`, `{book}`,
`{event}`, …; each maps to one of the five types in KIND). `generate()` returns sentences with their
slot spans; bench/train_entity_types.py runs `find_mentions` on each and labels every mention that
lies inside a slot with the slot's type — the candidates are the rules' own, as at run time.
"""

import random
import re

from bench.entity_type_templates import EN, ZH
from bench.statement_data import Lexicon

TYPES = ("person", "place", "organization", "work", "other")
KIND = {
    "person": "person", "place": "place", "org": "organization", "team": "organization", "brand": "organization",
    "company": "organization", "school": "organization", "work": "work", "book": "work", "film": "work",
    "song": "work", "game": "work", "painting": "work", "show": "work", "other": "other", "event": "other",
    "product": "other", "demonym": "other", "pet": "other", "breed": "other", "dish": "other", "any": None,
    "same": None, "namework": "work",
}

# --- English word lists (composed here) -----------------------------------------------------------

_SURNAMES = ("Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez "
             "Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark "
             "Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams "
             "Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts Patel Shah Kim Park Chen Wang Li Zhang Liu "
             "Tanaka Sato Suzuki Yamamoto Mueller Schmidt Schneider Fischer Weber Becker Rossi Russo Ferrari "
             "Dubois Laurent Moreau Petrov Ivanov Volkov Kowalski Novak Jensen Hansen Larsen Olsen Silva Santos "
             "Costa Oliveira Haddad Khan Ali Hussein Okafor Mensah Dlamini O'Brien Murphy Kelly Sullivan "
             "McCarthy Fitzgerald Gallagher Dawson Holloway Whitaker Pemberton Ashford Thornton Caldwell").split()
_HISTORIC = ("Rollo Charlemagne Aristotle Plato Socrates Confucius Cleopatra Napoleon Galileo Copernicus Tesla "
             "Edison Newton Darwin Einstein Euclid Archimedes Ptolemy Augustus Justinian Saladin Tamerlane "
             "Genghis Attila Hannibal Pericles Leonidas Boudica Hadrian Constantine Theodoric Alaric Clovis "
             "Pepin Canute Harald Olaf Ragnar Bjorn Magnus Sigurd Gustav Casimir Sobieski Kosciuszko Garibaldi "
             "Bismarck Metternich Talleyrand Robespierre Voltaire Rousseau Descartes Pascal Spinoza Leibniz Kant "
             "Hegel Nietzsche Goethe Schiller Beethoven Mozart Chopin Liszt Verdi Puccini Rembrandt Vermeer "
             "Caravaggio Michelangelo Raphael Donatello Leonardo Dante Petrarch Boccaccio Cervantes Shakespeare "
             "Milton Chaucer Keats Byron Shelley Tolstoy Dostoevsky Chekhov Pushkin Gogol Tagore Gandhi Nehru").split()
_TITLES = "Dr. Mr. Mrs. Ms. Prof. Professor President Senator Governor Mayor Judge Captain General King Queen Prince Princess Duke Saint Sir Lady Uncle Aunt Coach".split()
_PLACE_TAILS = ("River Lake Mountains Valley Island Islands Bay Beach Park Street Avenue Road County Province "
                "Falls Canyon Forest Desert Peninsula Heights Harbor Square Station Airport Springs Hills Coast").split()
_PLACE_HEADS = ("Lake Mount Port Fort San Santa New North South East West Saint").split()
_COUNTRYISH = ("Normandy Brittany Aquitaine Burgundy Flanders Bavaria Saxony Prussia Bohemia Moravia Silesia "
               "Galicia Andalusia Catalonia Lombardy Tuscany Sicily Sardinia Corsica Crete Cyprus Anatolia Persia "
               "Mesopotamia Babylon Byzantium Carthage Macedonia Thrace Dalmatia Wallachia Transylvania Siberia "
               "Manchuria Tibet Bengal Punjab Kashmir Deccan Yucatan Patagonia Amazonia Scandinavia Iberia "
               "Lapland Cornwall Yorkshire Kent Essex Wessex Mercia Northumbria Ulster Munster Leinster "
               "Connacht Gaul Hispania Britannia Germania Judea Galilee Sinai Arabia Nubia Abyssinia Zanzibar "
               "Borneo Sumatra Java Luzon Mindanao Hokkaido Kyushu Okinawa Tasmania Queensland Ontario Quebec "
               "Alberta Manitoba Yukon Greenland Iceland Faroe Svalbard Riviera Provence Alsace Lorraine Picardy "
               "Champagne Tyrol Styria Carinthia Carpathia Balkans Caucasus Crimea Ruhr Rhineland").split()
_CO_WORDS = ("Inc. Corp. Ltd. Group Holdings Technologies Systems Labs Partners Capital Foundation Institute "
             "Association Society Council Agency Bank Airlines Motors Pharmaceuticals Studios Records Press "
             "Publishing Media Network Entertainment Energy Industries Electric Insurance").split()
_ORG_PATTERNS = ("University of {P}|{P} University|{P} State University|{P} College|{P} Institute of Technology|"
                 "{P} High School|{P} Community College|{P} General Hospital|{P} Medical Center|Bank of {P}|"
                 "{P} City Council|{P} Public Library|{P} Museum of Art|{P} Symphony Orchestra|{P} Times|"
                 "{P} Herald|{P} Gazette|{P} Chamber of Commerce|Ministry of {N}|Department of {N}|"
                 "{P} Historical Society|Royal {N} Society|National {N} Association|{N} Party|"
                 "{P} Police Department|{P} Fire Department|{P} Board of Education|{P} Railway|{P} Airways").split("|")
_ORG_N = ("Defense Health Education Agriculture Commerce Labor Justice Energy Transport Finance Culture Science "
          "Geographic Astronomical Chemical Medical Democratic Republican Liberal Conservative Labour Green "
          "Socialist Progressive Historical Botanical").split()
_ACRONYMS = "NASA UNESCO NATO FIFA UEFA WHO IMF OPEC BBC CNN NBA NFL MLB NHL IBM HSBC BMW IKEA UCLA MIT NYU EU UN".split()
_TEAM_ANIMALS = ("Wolves Bears Eagles Hawks Lions Tigers Sharks Falcons Ravens Panthers Giants Rangers Rovers "
                 "Wanderers Warriors Knights Kings Stars Comets Rockets Thunder Storm Bulls Jets Pirates Cardinals "
                 "Dolphins Vikings Titans Raiders Chargers Broncos Mustangs Stallions Huskies Wildcats Hornets").split()
_BRANDS = ("Nike Adidas Puma Reebok Gatorade Starbucks Costco Walmart Target Ikea Lego Toyota Honda Ford Tesla "
           "Samsung Sony Nintendo Netflix Spotify Amazon Google Apple Microsoft Uber Airbnb Zara Gucci Prada "
           "Chanel Rolex Heineken Coca-Cola Pepsi Nestle Unilever Visa Mastercard Patagonia Lululemon "
           "Fabricon Zentrix Lumora Brightlane Corvana Velmont Quistar Orvella Kaldor Trevana").split()
_ADJ = ("Silent Hidden Last Lost Broken Golden Dark Bright Endless Forgotten Secret Wild Little Great Burning "
        "Frozen Crimson Eternal Quiet Distant Hollow Shattered Sacred Wandering Midnight Scarlet Iron Silver "
        "Invisible Restless Fallen Electric Beautiful Lonely Bitter Sweet Final Ancient Infinite").split()
_NOUNS = ("Garden River City Kingdom Empire Night Day Road Sea Storm Star Moon Sun Heart Shadow Light Fire Crown "
          "Dream Song Tide Forest House Door Window Mirror Bridge Tower Island Winter Summer Rain Wind Ghost Sword "
          "Journey Promise Memory Voice Game Legacy Horizon Dawn Harvest Orchard Labyrinth Symphony Letters "
          "Chronicles Saga Odyssey Legend Requiem Ballad Frontier Nocturne Lullaby Portrait Stranger Witness").split()
_VERBS_ING = "Finding Chasing Waiting Running Breaking Becoming Remembering Leaving Dancing Falling Saving Hunting Catching".split()
_WORK_PATTERNS = ("The {A} {N}|{A} {N}|The {N} of {N}|{N} of the {A} {N}|A {N} for {N}|{V} {N}|{V} the {N}|"
                  "The {N}|{N}s|{A} {N}s|The {N}'s {N}|{N} and {N}|{N} in {P}|The Last {N}|{N}: {A} {N}|"
                  "{N} II|{A} {N} 2|{N} Chronicles|Return to {N}|Beyond the {N}|Under the {A} {N}|"
                  "{Name}'s {N}|Dear {Name}|Letters to {Name}|The {N} Girl|{A} Nights|{N} Wars").split("|")
_GAME_SUFFIX = (": Origins|: Reborn| Online| Legends| Tactics| Simulator| Arena| 2| III| Remastered| Heroes|"
                ": Global Offensive| Kart| Quest| Odyssey").split("|")
_EVENTS = ("Christmas|Thanksgiving|Easter|Halloween|Hanukkah|Ramadan|Diwali|Passover|New Year's Eve|"
           "Valentine's Day|Mother's Day|Father's Day|Independence Day|Memorial Day|Labor Day|Super Bowl|"
           "World Cup|Olympics|Winter Olympics|Wimbledon|Tour de France|Coachella|Comic-Con|Black Friday|"
           "Oktoberfest|Mardi Gras|Burning Man|Renaissance|Reformation|Industrial Revolution|Cold War|"
           "Great Depression|Middle Ages|Enlightenment|Crusades|Holocaust|Brexit|Lent|Advent|Pride Month").split("|")
_EVENT_PATTERNS = ("{P} Marathon|{P} Film Festival|{P} Jazz Festival|{P} Book Fair|{P} Open|Battle of {P}|"
                   "Siege of {P}|Treaty of {P}|Council of {P}|{P} Conference|{P} Summit|{P} Grand Prix|"
                   "{P} Half Marathon|{P} Pride Parade|{N} Festival|{N} Week").split("|")
_PRODUCTS = ("iPhone|iPad|MacBook|Kindle|PlayStation|Xbox|Switch|Galaxy S24|Pixel|AirPods|Roomba|Prius|Corolla|"
             "Civic|Model 3|Fitbit|GoPro|Instant Pot|Vitamix|Windows|Android|Excel|Photoshop|Linux|ChatGPT|"
             "Zoom|Slack|WhatsApp|Instagram|TikTok|Facebook|Twitter|YouTube|Reddit|Discord|Tinder|Venmo|Duolingo|"
             "Peloton|Nespresso|Tylenol|Advil|Lipitor|Ozempic|Boeing 747|Airbus A380").split("|")
_PRODUCT_PATTERNS = ("{B} {X}|{B} {X} Pro|{B} {X} {D}|{B} {X} Max|{X} {D}|{X} {D} Plus").split("|")
_PRODUCT_X = "Air Nova Aero Flex Ultra Zen Pulse Spark Edge Wave Glide Bolt Echo Vista Core".split()
_DEMONYMS = ("American British English French German Italian Spanish Portuguese Dutch Belgian Swiss Austrian "
             "Swedish Norwegian Danish Finnish Icelandic Irish Scottish Welsh Polish Czech Slovak Hungarian "
             "Romanian Bulgarian Greek Turkish Russian Ukrainian Chinese Japanese Korean Vietnamese Thai Indian "
             "Pakistani Persian Arab Egyptian Moroccan Nigerian Kenyan Ethiopian Mexican Brazilian Argentine "
             "Chilean Peruvian Colombian Cuban Canadian Australian Norman Viking Roman Byzantine Ottoman Frankish "
             "Celtic Saxon Anglo-Saxon Gothic Mongol Aztec Inca Maya Catholic Protestant Muslim Christian Jewish "
             "Buddhist Hindu Latin Hebrew Sanskrit Mandarin Cantonese Swahili Bengali Tamil Gaelic Basque").split()
_RELIGIONS = ("Christianity Islam Buddhism Hinduism Judaism Catholicism Protestantism Taoism Confucianism Sikhism "
              "Marxism Communism Capitalism Impressionism Romanticism Baroque Gothic Modernism Stoicism").split()
_BREEDS = ("Golden Retriever|Labrador|German Shepherd|Beagle|Poodle|Bulldog|Corgi|Husky|Dachshund|Chihuahua|"
           "Shih Tzu|Border Collie|Great Dane|Maine Coon|Siamese|Persian|Ragdoll|Bengal|Sphynx|Pomeranian").split("|")
_DISHES = ("Pad Thai|Tiramisu|Pho|Paella|Biryani|Ramen|Sushi|Kimchi|Bibimbap|Lasagna|Risotto|Goulash|Borscht|"
           "Pierogi|Shawarma|Falafel|Hummus|Baklava|Croissant|Pavlova|Poutine|Gumbo|Jambalaya|Ceviche|"
           "Carbonara|Margherita|Caesar Salad|Eggs Benedict|Beef Wellington|Peking Duck|Kung Pao Chicken").split("|")
_AWARDS = ("Nobel Prize|Pulitzer Prize|Oscar|Grammy|Emmy|Tony|Booker Prize|Golden Globe|Purple Heart|"
           "Medal of Honor|Fields Medal|Turing Award|Ballon d'Or|MVP").split("|")

# --- Chinese word lists (composed here) -----------------------------------------------------------

_ZH_SURNAMES = list("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾萧田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤")
_ZH_GIVEN = list("伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍红鹏辉建国志文海波宁欣怡晨阳雪梅丹婷浩宇子轩思涵梓萱一诺晓东俊峰嘉琪雅慧佳颖")
_ZH_SYLLABLES = ("安 娜 玛 丽 亚 克 里 斯 托 弗 约 翰 威 廉 詹 姆 士 乔 治 大 卫 彼 得 保 罗 迈 尔 杰 西 卡 莎 拉 "
                 "艾 米 汉 森 伯 特 格 兰 德 维 奇 诺 夫 斯 基 奥 巴 马 林 顿 哈 罗 琳 凯 瑟 布 朗 索 菲 尼 古 拉 "
                 "海 梅 雷 耶 佩 内 塔 罗 杰 斯 芬 吉").split()
_ZH_COUNTRIES = ("中国 日本 韩国 美国 英国 法国 德国 意大利 西班牙 葡萄牙 荷兰 比利时 瑞士 瑞典 挪威 丹麦 芬兰 冰岛 "
                 "爱尔兰 波兰 俄罗斯 乌克兰 希腊 土耳其 埃及 印度 泰国 越南 新加坡 马来西亚 印尼 菲律宾 澳大利亚 澳洲 "
                 "新西兰 加拿大 墨西哥 巴西 阿根廷 智利 秘鲁 南非 肯尼亚 以色列 伊朗 伊拉克 沙特 欧洲 亚洲 非洲 "
                 "北美 南美 台湾 香港 澳门 大陆 中国大陆 内蒙古 新疆 西藏 东北 江南 华北 义大利 诺曼底").split()
_ZH_PLACE_TAILS = "市 省 区 县 镇 村 州 岛 山 湖 河 江 湾 半岛 公园 广场 路 街".split()
_ZH_ORG_TAILS = ("大学 学院 中学 小学 医院 研究所 研究院 协会 委员会 俱乐部 队 足球队 篮球队 电视台 出版社 报社 "
                 "银行 集团 公司 政府 法院 博物馆 图书馆 基金会 工作室 乐队 联盟 部 局").split()
_ZH_WORK_A = ("流浪 时间 星空 故乡 远方 青春 夏天 冬天 月光 城南 边城 围城 长安 江湖 风雪 山河 人间 平凡 少年 "
              "黑夜 白夜 红色 梦里 孤独 沉默 秘密 遗忘 春天 秋天 海上 天空 岁月 繁花 云端 追风").split()
_ZH_WORK_B = ("地球 的礼物 之歌 往事 旧事 传奇 的世界 之城 日记 简史 之旅 故事 花园 来信 之恋 的孩子 物语 "
              "之夜 之王 骑士 大陆 列车 的声音 飞鸟 情书 漫游 归来 狂想曲 协奏曲").split()
_ZH_EVENTS = ("春节 中秋节 端午节 元宵节 清明节 国庆节 圣诞节 感恩节 情人节 万圣节 奥运会 世界杯 亚运会 "
              "冬奥会 双十一 春运 高考 文艺复兴 工业革命 冷战 辛亥革命 五四运动 改革开放 广交会 进博会").split()
_ZH_EVENT_TAILS = "马拉松 博览会 电影节 音乐节 运动会 艺术节 峰会 论坛 大会 锦标赛 公开赛 战役".split()
_ZH_PRODUCTS = ("苹果手机 iPhone 微信 支付宝 淘宝 抖音 快手 微博 小红书 王者荣耀 华为Mate 小米手环 特斯拉Model 3 "
                "ChatGPT Kindle PlayStation 任天堂Switch 钉钉 美团 饿了么 大众点评 高德地图 百度地图").split()
_ZH_DEMONYMS = ("诺曼人 维京人 罗马人 汉族 蒙古族 藏族 满族 回族 壮族 苗族 法国人 德国人 英国人 日本人 韩国人 "
                "美国人 俄罗斯人 意大利人 西班牙人 荷兰人 阿拉伯人 犹太人 普通话 粤语 英语 法语 德语 日语 "
                "佛教 道教 基督教 伊斯兰教 天主教 儒家 印象派 巴洛克").split()
_ZH_BREEDS = "金毛 柯基 泰迪 哈士奇 拉布拉多 柴犬 边牧 萨摩耶 比熊 布偶猫 英短 橘猫 暹罗猫 加菲猫".split()
_ZH_DISHES = "宫保鸡丁 麻婆豆腐 北京烤鸭 小笼包 红烧肉 回锅肉 酸菜鱼 东坡肉 糖醋排骨 兰州拉面 螺蛳粉 肉夹馍 煎饼果子 臭豆腐".split()


class Fillers:
    """Slot fillers of each sub-kind, in English and Chinese."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.lex = Lexicon(rng)
        names = self.lex.names
        self.given = names
        self.places = self.lex.places
        self.zh_places = self.lex.zh_places

    def pick(self, seq):
        return self.rng.choice(seq)

    def _place_word(self) -> str:
        return self.pick(self.places) if self.rng.random() < 0.7 else self.pick(_COUNTRYISH)

    def _name(self) -> str:
        return self.pick(self.given)

    def _title_words(self) -> str:
        pattern = self.pick(_WORK_PATTERNS)
        return (pattern.replace("{A}", self.pick(_ADJ), 1).replace("{A}", self.pick(_ADJ))
                .replace("{N}", self.pick(_NOUNS), 1).replace("{N}", self.pick(_NOUNS), 1).replace("{N}", self.pick(_NOUNS))
                .replace("{V}", self.pick(_VERBS_ING)).replace("{P}", self._place_word()).replace("{Name}", self._name()))

    def en(self, kind: str) -> str:
        r = self.rng.random()
        if kind == "person":
            if r < 0.35:
                return self._name()
            if r < 0.75:
                return f"{self._name()} {self.pick(_SURNAMES)}"
            if r < 0.85:
                return f"{self.pick(_TITLES)} {self.pick(_SURNAMES + self.given)}"
            if r < 0.93:
                return self.pick(_HISTORIC)
            return self.pick(_SURNAMES)
        if kind == "place":
            if r < 0.55:
                return self.pick(self.places)
            if r < 0.7:
                return self.pick(_COUNTRYISH)
            if r < 0.85:
                return f"{self._place_word()} {self.pick(_PLACE_TAILS)}"
            if r < 0.95:
                return f"{self.pick(_PLACE_HEADS)} {self.pick(self.places + _SURNAMES)}"
            return f"{self.pick(_SURNAMES)} {self.pick(_PLACE_TAILS)}"
        if kind in ("org", "company", "school"):
            if r < 0.35:
                return self.lex.company()
            if r < 0.65:
                return self.pick(_ORG_PATTERNS).replace("{P}", self._place_word()).replace("{N}", self.pick(_ORG_N))
            if r < 0.8:
                return f"{self.pick(_SURNAMES + self.lex.names)} {self.pick(_CO_WORDS)}"
            if r < 0.9:
                return self.pick(_ACRONYMS)
            return self.pick(_BRANDS)
        if kind == "team":
            return f"{self._place_word()} {self.pick(_TEAM_ANIMALS)}" if r < 0.8 else f"{self._place_word()} {self.pick(['FC', 'United', 'City'])}"
        if kind == "brand":
            return self.pick(_BRANDS)
        if kind in ("work", "book", "film", "song", "painting", "show"):
            return self._title_words()
        if kind == "namework":  # a title that is a name: "Jane Eyre", "Harry Potter"
            return f"{self._name()} {self.pick(_SURNAMES)}" if r < 0.7 else self._name()
        if kind == "game":
            return self._title_words() + (self.pick(_GAME_SUFFIX) if r < 0.4 else "")
        if kind in ("other", "event"):
            if kind == "other":
                return self.en(self.pick(["event", "product", "demonym", "pet", "breed", "dish", "event"]))
            if r < 0.5:
                return self.pick(_EVENTS)
            if r < 0.85:
                return self.pick(_EVENT_PATTERNS).replace("{P}", self._place_word()).replace("{N}", self.pick(_NOUNS))
            return self.pick(_AWARDS)
        if kind == "product":
            if r < 0.55:
                return self.pick(_PRODUCTS)
            return (self.pick(_PRODUCT_PATTERNS).replace("{B}", self.pick(_BRANDS)).replace("{X}", self.pick(_PRODUCT_X))
                    .replace("{D}", str(self.rng.randint(2, 20))))
        if kind == "demonym":
            return self.pick(_DEMONYMS) if r < 0.8 else self.pick(_RELIGIONS)
        if kind == "pet":
            from bench.statement_data import _PET_NAMES
            return self.pick(_PET_NAMES) if r < 0.6 else self._name()
        if kind == "breed":
            return self.pick(_BREEDS)
        if kind == "dish":
            return self.pick(_DISHES)
        raise KeyError(kind)

    def _zh_person(self) -> str:
        r = self.rng.random()
        if r < 0.55:
            return self.pick(_ZH_SURNAMES) + "".join(self.pick(_ZH_GIVEN) for _ in range(self.rng.randint(1, 2)))
        parts = ["".join(self.pick(_ZH_SYLLABLES) for _ in range(self.rng.randint(2, 3))) for _ in range(self.rng.randint(1, 2))]
        return "·".join(parts)

    def _zh_place(self) -> str:
        return self.pick(self.zh_places)

    def zh(self, kind: str) -> str:
        r = self.rng.random()
        if kind == "person":
            return self._zh_person()
        if kind == "place":
            if r < 0.25:
                return self.pick(_ZH_COUNTRIES)
            if r < 0.65:
                return self._zh_place()
            base = self._zh_place()
            return base + self.pick(_ZH_PLACE_TAILS) if not base.endswith(("市", "省", "区", "县")) else base
        if kind in ("org", "company", "school", "brand"):
            if r < 0.45:
                return self.lex.zh_company()
            if r < 0.85:
                return self._zh_place() + self.pick(_ZH_ORG_TAILS)
            if r < 0.93:
                return self._zh_place() + "人民政府"
            return self.pick(_ACRONYMS)
        if kind == "team":
            return self._zh_place() + self.pick(["队", "足球队", "篮球队", "俱乐部", "国家队"])
        if kind in ("work", "book", "film", "song", "game", "painting", "show"):
            if r < 0.8:
                return self.pick(_ZH_WORK_A) + self.pick(_ZH_WORK_B)
            return self.pick(_ZH_WORK_A) + self.pick(_ZH_WORK_A)
        if kind in ("other", "event"):
            if kind == "other":
                return self.zh(self.pick(["event", "product", "demonym", "pet", "breed", "dish"]))
            return self.pick(_ZH_EVENTS) if r < 0.6 else self._zh_place() + self.pick(_ZH_EVENT_TAILS)
        if kind == "product":
            return self.pick(_ZH_PRODUCTS)
        if kind == "demonym":
            return self.pick(_ZH_DEMONYMS)
        if kind == "pet":
            from bench.statement_data import _ZH_PET_NAMES
            return self.pick(_ZH_PET_NAMES)
        if kind == "breed":
            return self.pick(_ZH_BREEDS)
        if kind == "dish":
            return self.pick(_ZH_DISHES)
        raise KeyError(kind)


# --- templates: EN and ZH, in bench/entity_type_templates.py ---------------------------------

_SLOT = re.compile(r"\{(\w+)\}")
_NOISE_EN = ("the a to and of in for with on at it is was we my i you that this so but just really not have had "
             "got went saw said think know like about after before then when what there here today yesterday "
             "week year time people thing way new old good great big little last first next also more very "
             "again still even back out up over from by as be been are were do did can will would could "
             "should one two three some many much all every most other such only own same than too").split()
_NOISE_ZH = list("我你他她们的了是在有和就不也都很这那个上下去来说到要会好看还没把被给让跟从对为着过吗呢吧啊")


def templates(block: str) -> list[str]:
    return [line.strip() for line in block.strip().splitlines() if line.strip()]


EN_TEMPLATES = templates(EN)
ZH_TEMPLATES = templates(ZH)
_ANY = ("person", "place", "org", "work", "other")


def noise_template(rng: random.Random, zh: bool) -> str:
    """A slot among random common words: a context that tells nothing, so the mention has to."""
    words = _NOISE_ZH if zh else _NOISE_EN
    left = [rng.choice(words) for _ in range(rng.randint(0, 6))]
    right = [rng.choice(words) for _ in range(rng.randint(0, 6))]
    joiner = "" if zh else " "
    text = joiner.join(left + ["{any}"] + right)
    return (text[:1].upper() + text[1:] if not zh else text) + ("。" if zh else rng.choice([".", "", "!", "?"]))


def example(rng: random.Random, fill: Fillers, zh: bool, template: str) -> dict:
    """A sentence and its slots: (start, end, type)."""
    spans, text = [], ""
    last = 0
    same = rng.choice(_ANY + ("book", "film", "game", "team", "company", "event", "place", "person"))
    for m in _SLOT.finditer(template):
        text += template[last:m.start()]
        kind = m.group(1)
        if kind == "any":
            kind = rng.choice(_ANY)
        elif kind == "same":  # a list: its names are of one type ("Genoa and Lucca", "成都和重庆")
            kind = same
        value = fill.zh(kind) if zh else fill.en(kind)
        if not zh and rng.random() < 0.08 and kind in ("work", "book", "film", "song", "game"):
            value = f'"{value}"'  # a title in quotes, as chats write them
        spans.append((len(text), len(text) + len(value), KIND[kind]))
        text += value
        last = m.end()
    text += template[last:]
    return {"text": text, "spans": spans, "lang": "zh" if zh else "en", "template": template}
