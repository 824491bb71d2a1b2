# ruff: noqa: E501  (catalogue lines stay whole)
"""The texts of the `web_search` built-in, in each language (its `Plugin(texts=...)`)."""

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "help.fn.web_search": "Search the web and answer with source links.",
        "web_search.not_enabled_group": "web search is not enabled for this group (ask an admin to "
        "add it to web_search config)",
        "web_search.not_enabled_user": "web search is not enabled for you (ask an admin to add it "
        "to web_search config)",
        "web_search.err.no_key": "web_search.api_key is not set",
        "web_search.err.timeout": "the search service did not answer in time",
        "web_search.err.unreachable": "cannot reach the search service",
        "web_search.err.auth": "the search service rejected the API key ({status}); check "
        "web_search.api_key",
        "web_search.err.rate_limited": "the search service is rate-limiting us (429); try again later",
        "web_search.err.status": "the search service answered {status}",
        "web_search.err.failed": "search request failed ({kind})",
        "web_search.err.no_answer": "the search service sent no answer ({data})",
        "web_search.err.empty": "the search service sent an empty answer",
        "web_search.not_configured": "Web search is not configured on this bot.",
        "web_search.failed": "Web search failed: {error}. Tell the user, or answer from what you "
        "know and say it was not checked.",
    },
    "zh": {
        "help.fn.web_search": "联网搜索，并附上来源链接回答。",
        "web_search.not_enabled_group": "本群未开启联网搜索（请管理员在 web_search 配置中添加）",
        "web_search.not_enabled_user": "你未开启联网搜索（请管理员在 web_search 配置中添加）",
        "web_search.err.no_key": "未设置 web_search.api_key",
        "web_search.err.timeout": "搜索服务没有及时响应",
        "web_search.err.unreachable": "无法连接搜索服务",
        "web_search.err.auth": "搜索服务拒绝了 API 密钥（{status}），请检查 web_search.api_key",
        "web_search.err.rate_limited": "搜索服务正在限流（429），请稍后再试",
        "web_search.err.status": "搜索服务返回了 {status}",
        "web_search.err.failed": "搜索请求失败（{kind}）",
        "web_search.err.no_answer": "搜索服务没有给出回答（{data}）",
        "web_search.err.empty": "搜索服务给出的回答为空",
        "web_search.not_configured": "这个机器人没有配置联网搜索。",
        "web_search.failed": "联网搜索失败：{error}。请告诉用户，或根据已有知识回答并说明未经核实。",
    },
}
