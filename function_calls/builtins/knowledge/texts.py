# ruff: noqa: E501  (CJK characters count double; catalogue lines stay whole)
"""The texts of the `knowledge` built-in, in each language (its `Plugin(texts=...)`)."""

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "help.fn.knowledge_search": "Search this chat's knowledge base (its documents), with sources.",
        "help.fn.kb": "The knowledge base: /kb search <words>; admins: /kb list, /kb add [base] "
        "<url or text>, /kb remove <id>, /kb reindex [base].",
        "kb.not_running": "The knowledge base is not running (knowledge.enabled is off or the bot "
        "has not started).",
        "kb.no_bases": "No knowledge base is set for this chat (a chats: rule's knowledge: [...]).",
        "kb.no_such_base": "There is no knowledge base {base!r} here; this chat has: {bases}.",
        "kb.nothing": 'Nothing in the knowledge base matches "{query}".',
        "kb.found": '{count} passages for "{query}":',
        "kb.usage": "Usage: /kb search <words>; admins: /kb list, /kb add [base] <url or text>, "
        "/kb remove <id>, /kb reindex [base].",
        "kb.admin_only": "Only the bot's admins may use /kb {verb}.",
        "kb.list_base": "{base}: {docs} documents, {passages} passages, {search}",
        "kb.hybrid": "hybrid search with {model}",
        "kb.keyword": "keyword search (BM25)",
        "kb.added_by": ", added by {who}",
        "kb.added": 'Added #{id} "{what}" to {base} ({passages} passages).',
        "kb.add_failed": "Could not add {what}: {error}",
        "kb.no_such_doc": "No document #{id}; /kb list shows the ids.",
        "kb.from_config": "#{id} ({source}) comes from the config's sources; remove it there.",
        "kb.removed": "Removed #{id} ({source}) from {base}.",
        "kb.reindexed": "Re-indexed {bases}: {indexed} indexed, {unchanged} unchanged, {removed} "
        "removed, {failed} failed.",
    },
    "zh": {
        "help.fn.knowledge_search": "检索本群的知识库（群里的文档），并注明出处。",
        "help.fn.kb": "知识库：/kb search <关键词>；管理员：/kb list、/kb add [库名] <网址或文字>、"
        "/kb remove <编号>、/kb reindex [库名]。",
        "kb.not_running": "知识库没有运行（knowledge.enabled 已关闭或机器人尚未启动）。",
        "kb.no_bases": "这个聊天没有设置知识库（在 chats: 规则里写 knowledge: [...]）。",
        "kb.no_such_base": "这里没有名为 {base!r} 的知识库；这个聊天可用：{bases}。",
        "kb.nothing": "知识库里没有与“{query}”相关的内容。",
        "kb.found": "与“{query}”相关的 {count} 段内容：",
        "kb.usage": "用法：/kb search <关键词>；管理员：/kb list、/kb add [库名] <网址或文字>、"
        "/kb remove <编号>、/kb reindex [库名]。",
        "kb.admin_only": "只有机器人管理员可以使用 /kb {verb}。",
        "kb.list_base": "{base}：{docs} 篇文档，{passages} 段，{search}",
        "kb.hybrid": "混合检索（{model}）",
        "kb.keyword": "关键词检索（BM25）",
        "kb.added_by": "，由 {who} 添加",
        "kb.added": "已把 #{id}“{what}”加入 {base}（{passages} 段）。",
        "kb.add_failed": "无法添加 {what}：{error}",
        "kb.no_such_doc": "没有编号为 #{id} 的文档；/kb list 会列出编号。",
        "kb.from_config": "#{id}（{source}）来自配置文件的 sources，请在那里删除。",
        "kb.removed": "已从 {base} 删除 #{id}（{source}）。",
        "kb.reindexed": "已重建 {bases} 的索引：{indexed} 篇已索引，{unchanged} 篇未变，{removed} "
        "篇已删除，{failed} 篇失败。",
    },
}
