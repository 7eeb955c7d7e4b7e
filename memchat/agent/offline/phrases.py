"""What the offline model says, in English and Chinese."""

from __future__ import annotations

from typing import Any

_PHRASES: dict[str, tuple[str, str]] = {
    "hello": ("Hello! I'm memchat's offline model. Tell me about yourself (\"I like Go\") and I'll remember it; "
              "ask me later (\"what do I like?\").",
              "你好！我是 memchat 的离线模型。告诉我关于你的事（比如“我喜欢 Go”），我会记住；之后可以问我“我喜欢什么？”。"),
    "help": ("I'm memchat's offline model, not a language model: I can remember facts you tell me "
             "(\"I like Go\", \"remember that my sister is Ana\") and recall them (\"what do I like?\"). "
             "Set OPENAI_API_KEY (and OPENAI_BASE_URL for other providers) to chat with a real model.",
             "我是 memchat 的离线模型，不是大语言模型：我可以记住你告诉我的事（“我喜欢 Go”），也可以回忆"
             "（“我喜欢什么？”）。设置 OPENAI_API_KEY（其他服务商再设 OPENAI_BASE_URL）即可使用真正的模型。"),
    "greet_name": ("Nice to meet you, {name}! Let me remember that.", "你好{name}！很高兴认识你，我把这个记下来。"),
    "looking": ("Let me check my memory.", "我来查看一下记忆。"),
    "you_said": ("Earlier in this conversation you said: “{text}”", "你在这次对话里之前说的是：“{text}”"),
    "said_nothing": ("You haven't said anything else in this conversation yet.", "这次对话里你还没有说过别的话。"),
    "remembered": ("Got it, I'll remember: {items}.", "好的，我记住了：{items}。"),
    "recall": ("Here's what I remember:\n{items}", "根据我的记忆：\n{items}"),
    "no_memories": ("I don't have any memories about that yet. Tell me and I'll remember.",
                    "我还没有这方面的记忆。告诉我，我会记住。"),
    "updated": ("Got it, I've updated my memory: {new} (was: {old}).", "好的，已更新记忆：{new}（原来是：{old}）。"),
    "forgotten": ("Done, I've forgotten: {item}", "好的，已经忘掉了：{item}"),
    "nothing_to_forget": ("I couldn't find a memory like that to forget.", "没有找到要忘记的记忆。"),
    "cleared": ("Done, I've forgotten everything about you.", "好的，关于你的记忆已全部清空。"),
    "failed": ("I couldn't do that: {error}", "没能完成：{error}"),
    "background": ("Noted. Memories are saved in the background after each turn, so this will be taken care of.",
                   "好的，记忆会在每轮对话后于后台自动保存。"),
    "add_disabled": ("I'd remember that, but the memory_add tool is disabled.", "我想记住这件事，但 memory_add 工具已禁用。"),
    "delete_disabled": ("I can't delete memories myself (my memory_delete tool is off), but you can: "
                        "type /forget and what to forget (e.g. /forget I like Go), or press d on it in the "
                        "memory panel (ctrl+b). To let me do it, start memchat with --enable-tool memory_delete.",
                        "我自己不能删除记忆（memory_delete 工具未启用），但你可以：输入 /forget 加要忘记的内容"
                        "（如 /forget 我喜欢 Go），或在记忆面板（ctrl+b）中选中后按 d。"
                        "想让我来删，请用 --enable-tool memory_delete 启动 memchat。"),
    "clear_disabled": ("I can't clear all memories: memory_clear is disabled "
                       "(start memchat with --enable-tool memory_clear).",
                       "无法清空记忆：memory_clear 已禁用（用 --enable-tool memory_clear 启动 memchat）。"),
    "no_read_tools": ("I can't look anything up: memory_search and memory_load are disabled.",
                      "无法查询：memory_search 和 memory_load 已禁用。"),
}  # fmt: skip


def say(chinese: bool, phrase: str, **values: Any) -> str:
    english, zh = _PHRASES[phrase]
    return (zh if chinese else english).format(**values)
