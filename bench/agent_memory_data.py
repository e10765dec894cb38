"""The agent-memory benchmark's transcripts and labels (written before the first run; see bench/agent_memory.py).

14 agent transcripts (coding, booking, data lookup; English and Chinese; successes and failures), 2 chats
without tools (no case expected), 3 team chats, and the questions whose answer is a case, a skill or a
participant's own statement. A turn is (role, sender, text); an agent's tool call is written as the
OpenAI-style JSON it would post ({"name": ..., "arguments": ...}) and a tool's reply has role "tool".
Labels: `case` (a case is expected), `label` (its outcome), `skill` (the skill its cluster should
yield, when its agent has two successes of that kind), `tools` (the tools it called, in order).
"""

import json


def call(name: str, **arguments) -> tuple:
    return ("assistant", "agent", json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False))


def tool(name: str, text: str) -> tuple:
    return ("tool", name, text)


def user(text: str) -> tuple:
    return ("user", "user", text)


def agent(text: str) -> tuple:
    return ("assistant", "agent", text)


TRANSCRIPTS = {
    # --- dev-bot: fixing failing tests ------------------------------------------------------------------
    "C1": {"agent": "dev-bot", "case": True, "label": "success", "skill": "fix-tests",
           "tools": ["run_tests", "edit_file"], "turns": [
               user("The CI build fails on the date parser tests, can you fix it?"),
               call("run_tests", path="tests/test_dates.py"),
               tool("run_tests", "FAILED tests/test_dates.py::test_iso_week - AssertionError: expected week 53"),
               agent("The parser counts ISO weeks from Sunday; I will make weeks start on Monday."),
               call("edit_file", path="dates.py"),
               tool("edit_file", "ok: 3 lines changed"),
               call("run_tests", path="tests/test_dates.py"),
               tool("run_tests", "12 passed in 0.4s"),
               agent("Fixed: the ISO week parser now starts weeks on Monday and all date tests pass."),
               user("Thanks, that works!")]},
    "C2": {"agent": "dev-bot", "case": True, "label": "success", "skill": "fix-tests",
           "tools": ["run_tests", "edit_file"], "turns": [
               user("The unit tests of the payment module are failing after the refactor, please fix them."),
               call("run_tests", path="tests/test_payments.py"),
               tool("run_tests", "FAILED tests/test_payments.py::test_refund - TypeError: amount must be Decimal"),
               agent("The refund path passes a float; I will convert the amount to Decimal before the call."),
               call("edit_file", path="payments/refunds.py"),
               tool("edit_file", "ok: 1 line changed"),
               call("run_tests", path="tests/test_payments.py"),
               tool("run_tests", "31 passed in 1.2s"),
               agent("Done: refunds convert the amount to Decimal and the payment tests pass again.")]},
    "C3": {"agent": "dev-bot", "case": True, "label": "failure", "skill": "fix-tests",
           "tools": ["run_tests"], "turns": [
               user("The login test is flaky on CI, can you fix the failing test?"),
               call("run_tests", path="tests/test_login.py", repeat=20),
               tool("run_tests", "20 passed"),
               call("run_tests", path="tests/test_login.py", repeat=50),
               tool("run_tests", "50 passed"),
               agent("I could not reproduce the flaky login failure locally, so I was not able to fix it."),
               user("It still fails on CI, that doesn't work.")]},
    "C4": {"agent": "dev-bot", "case": True, "label": "success", "skill": "fix-tests",
           "tools": ["run_tests", "edit_file"], "turns": [
               user("构建失败了，订单模块的单元测试没通过，帮我修复一下。"),
               call("run_tests", path="tests/test_orders.py"),
               tool("run_tests", "FAILED tests/test_orders.py::test_total - 错误: 运费没有计入总价"),
               call("edit_file", path="orders/total.py"),
               tool("edit_file", "ok"),
               call("run_tests", path="tests/test_orders.py"),
               tool("run_tests", "18 passed"),
               agent("已修复：总价现在包含运费，订单模块的测试全部通过。")]},
    # --- travel-bot: hotels and flights ------------------------------------------------------------------
    "B1": {"agent": "travel-bot", "case": True, "label": "success", "skill": "book-hotel",
           "tools": ["search_hotels", "reserve_room"], "turns": [
               user("Please book a hotel room in Lisbon near the conference venue for March 3 to 6."),
               call("search_hotels", city="Lisbon", near="FIL venue"),
               tool("search_hotels", "3 results: Hotel Avenida (2 rooms), Tivoli Oriente (1 room), Myriad (0 rooms)"),
               call("reserve_room", hotel="Hotel Avenida", nights=3),
               tool("reserve_room", "reservation confirmed: AV-2291"),
               agent("Booked Hotel Avenida in Lisbon from March 3 to 6; confirmation AV-2291 is in your inbox."),
               user("Perfect, thanks!")]},
    "B2": {"agent": "travel-bot", "case": True, "label": "success", "skill": "book-hotel",
           "tools": ["search_hotels", "reserve_room"], "turns": [
               user("I need a hotel room in Porto for the client visit next Tuesday and Wednesday."),
               call("search_hotels", city="Porto"),
               tool("search_hotels", "2 results: Hotel Ribeira (4 rooms), Infante Sagres (2 rooms)"),
               call("reserve_room", hotel="Hotel Ribeira", nights=2),
               tool("reserve_room", "reservation confirmed: RB-118"),
               agent("Reserved Hotel Ribeira in Porto for two nights; the confirmation is RB-118.")]},
    "B3": {"agent": "travel-bot", "case": True, "label": "failure", "skill": "book-hotel",
           "tools": ["search_hotels", "reserve_room"], "turns": [
               user("Book me a hotel room in Madrid for the trade fair weekend."),
               call("search_hotels", city="Madrid", near="IFEMA"),
               tool("search_hotels", "1 result: Hotel Prado (1 room)"),
               call("reserve_room", hotel="Hotel Prado", nights=2),
               tool("reserve_room", "error: no availability for these dates (HTTP 409)"),
               agent("I could not book a hotel in Madrid: the last room was taken and every hotel near IFEMA is "
                     "sold out for the fair.")]},
    "B4": {"agent": "travel-bot", "case": True, "label": "success", "skill": None,
           "tools": ["search_flights", "book_flight"], "turns": [
               user("Find and book a morning flight to Berlin on Friday."),
               call("search_flights", to="BER", day="Friday", before="12:00"),
               tool("search_flights", "LH 1171 07:05, EW 8001 09:40"),
               call("book_flight", flight="LH 1171"),
               tool("book_flight", "ticket issued 220-4411"),
               agent("Booked LH 1171 to Berlin at 07:05 on Friday; ticket 220-4411.")]},
    "B5": {"agent": "travel-bot", "case": True, "label": "success", "skill": "book-hotel",
           "tools": ["search_hotels", "reserve_room"], "turns": [
               user("帮我预订上海浦东的酒店房间，下周一入住两晚。"),
               call("search_hotels", city="上海", near="浦东"),
               tool("search_hotels", "2 个结果：浦东香格里拉（3 间），锦江之星（5 间）"),
               call("reserve_room", hotel="浦东香格里拉", nights=2),
               tool("reserve_room", "预订成功：SH-5521"),
               agent("已预订浦东香格里拉两晚，确认号 SH-5521。")]},
    # --- data-bot: lookups -------------------------------------------------------------------------------
    "D1": {"agent": "data-bot", "case": True, "label": "success", "skill": "sql-lookup",
           "tools": ["sql_query"], "turns": [
               user("What was the EMEA revenue last quarter?"),
               call("sql_query", sql="SELECT sum(amount) FROM revenue WHERE region = 'EMEA' AND quarter = 'Q3'"),
               tool("sql_query", "error: column quarter does not exist"),
               call("sql_query", sql="SELECT sum(amount) FROM revenue WHERE region = 'EMEA' AND fiscal_q = 3"),
               tool("sql_query", "sum = 4820000"),
               agent("EMEA revenue last quarter was 4.82 million euros (fiscal Q3)."),
               user("Great, exactly what I needed.")]},
    "D2": {"agent": "data-bot", "case": True, "label": "success", "skill": "sql-lookup",
           "tools": ["sql_query"], "turns": [
               user("How many active customers did we have in March?"),
               call("sql_query", sql="SELECT count(*) FROM customers WHERE active AND month = '2024-03'"),
               tool("sql_query", "count = 1312"),
               agent("Found it: there were 1,312 active customers in March.")]},
    "D3": {"agent": "data-bot", "case": True, "label": "success", "skill": "sql-lookup",
           "tools": ["sql_query"], "turns": [
               user("帮我查一下上个季度华东区的销售额。"),
               call("sql_query", sql="SELECT sum(amount) FROM sales WHERE region = '华东'"),
               tool("sql_query", "错误: 表 sales 不存在"),
               call("sql_query", sql="SELECT sum(amount) FROM orders WHERE region = '华东'"),
               tool("sql_query", "sum = 1284000"),
               agent("已完成：上个季度华东区的销售额是 128.4 万元。")]},
    "D4": {"agent": "data-bot", "case": True, "label": "failure", "skill": "sql-lookup",
           "tools": ["sql_query"], "turns": [
               user("What is the churn rate by customer segment for last year?"),
               call("sql_query", sql="SELECT segment, churn FROM churn_by_segment"),
               tool("sql_query", "error: relation churn_by_segment does not exist"),
               call("sql_query", sql="SELECT segment, count(*) FROM cancellations GROUP BY segment"),
               tool("sql_query", "error: permission denied for table cancellations"),
               agent("I was unable to compute the churn rate: the churn tables are missing or I lack permission.")]},
    "D5": {"agent": "data-bot", "case": True, "label": "failure", "skill": None,
           "tools": ["analytics_api"], "turns": [
               user("查一下昨天网站的访问量。"),
               call("analytics_api", metric="visits", day="yesterday"),
               tool("analytics_api", "超时：分析服务没有响应"),
               agent("抱歉，分析服务超时，没能查到昨天的访问量。")]},
    # --- chats without tools: no case -------------------------------------------------------------------
    "N1": {"agent": "travel-bot", "case": False, "label": None, "skill": None, "tools": [], "turns": [
        user("I'm thinking about a weekend in the mountains, any ideas?"),
        agent("The Dolomites are lovely in September; Cortina has easy hikes."),
        user("Sounds nice, I love hiking.")]},
    "N2": {"agent": "data-bot", "case": False, "label": None, "skill": None, "tools": [], "turns": [
        user("你觉得周报应该用折线图还是柱状图？"),
        agent("趋势用折线图，对比用柱状图。"),
        user("好的，谢谢。")]},
}

EXPECTED_SKILLS = {  # skill -> (agent, the transcripts it is learnt from)
    "fix-tests": ("dev-bot", ["C1", "C2", "C3", "C4"]),
    "book-hotel": ("travel-bot", ["B1", "B2", "B3", "B5"]),
    "sql-lookup": ("data-bot", ["D1", "D2", "D3", "D4"]),
}

# Feedback an agent reports after reusing each skill, in order; the maturity each should end at is
# the rule's (s + 1) / (s + f + 2) over its cases and this feedback, for the cases the cluster holds.
FEEDBACK = {
    "book-hotel": ["success", "success", "success"],
    "fix-tests": ["failure", "failure"],
    "sql-lookup": ["success", "failure", "success"],
}

TEAM_CHATS = {
    "T1": {"group": "platform-team", "turns": [
        ("Alice", "Morning team. I finished the payment webhook retries and opened the pull request."),
        ("Bob", "I will review the webhook pull request after lunch and then start on the invoice export."),
        ("Chen", "I am blocked on the staging database migration, the schema lock keeps timing out."),
        ("Dana", "Thanks Alice!"),
        ("Alice", "Chen, try the migration outside business hours when the lock is free."),
        ("Chen", "Good idea, I will rerun the staging migration tonight and report tomorrow.")]},
    "T2": {"group": "launch-crew", "turns": [
        ("Priya", "The mobile app launch is set for the 14th; I own the press release and the store listing."),
        ("Tom", "I'm finishing the onboarding screens and the crash reporting setup this week."),
        ("Uma", "I'll run the beta feedback survey with the 200 testers and send a summary by Friday."),
        ("Tom", "Uma, can you include questions about the sign-up flow?"),
        ("Uma", "Yes, I will add three sign-up flow questions to the survey."),
        ("Priya", "Great, let's freeze features on the 10th.")]},
    "T3": {"group": "周会", "turns": [
        ("王伟", "这周我负责把推荐服务迁移到新的集群上，预计周四完成。"),
        ("李娜", "我在整理用户访谈的结论，周五前把报告发给大家。"),
        ("张强", "好的。"),
        ("张强", "我来修复支付页面在安卓上的白屏问题，今天先定位原因。"),
        ("王伟", "迁移时推荐服务会停机十分钟，我会提前通知客服。")]},
}

QUESTIONS = [
    # (question, agent_id, kind asked, expected answer)
    ("How did the agent fix the failing CI date parser tests?", "dev-bot", "agent_case", ("case", "C1")),
    ("What happened with the flaky login test on CI?", "dev-bot", "agent_case", ("case", "C3")),
    ("订单模块的单元测试是怎么修好的？", "dev-bot", "agent_case", ("case", "C4")),
    ("What happened when booking a hotel in Madrid for the trade fair?", "travel-bot", "agent_case", ("case", "B3")),
    ("Which flight to Berlin was booked?", "travel-bot", "agent_case", ("case", "B4")),
    ("上海浦东的酒店订好了吗？", "travel-bot", "agent_case", ("case", "B5")),
    ("How was the churn rate by segment request handled?", "data-bot", "agent_case", ("case", "D4")),
    ("华东区上个季度的销售额是怎么查到的？", "data-bot", "agent_case", ("case", "D3")),
    ("昨天网站访问量查到了吗？", "data-bot", "agent_case", ("case", "D5")),
    ("How do I book a hotel room for a business trip?", "travel-bot", "agent_skill", ("skill", "book-hotel")),
    ("What is the procedure to fix failing unit tests?", "dev-bot", "agent_skill", ("skill", "fix-tests")),
    ("How to look up a sales or revenue figure in the database?", "data-bot", "agent_skill", ("skill", "sql-lookup")),
    ("What is Chen working on?", None, "participant", ("personal", "T1", "Chen")),
    ("What will Bob do after lunch?", None, "participant", ("personal", "T1", "Bob")),
    ("What did Uma commit to for the launch?", None, "participant", ("personal", "T2", "Uma")),
    ("What does Priya own for the launch?", None, "participant", ("personal", "T2", "Priya")),
    ("李娜这周负责什么？", None, "participant", ("personal", "T3", "李娜")),
    ("张强在修什么问题？", None, "participant", ("personal", "T3", "张强")),
]
