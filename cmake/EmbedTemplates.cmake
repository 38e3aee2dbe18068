#===- EmbedTemplates.cmake - templates/ into the deltac binary -----------===#
#
#   cmake -DROOT=<templates dir> -DFILES="a;b" -DOUT=<file.inc> -P ...
#
# deltac carries its templates so an installed deltac needs no source tree.
# Each file becomes one {name, text} entry of a raw string literal.
#===--------------------------------------------------------------------===#
set(text "// Generated from templates/ by cmake/EmbedTemplates.cmake.\n")
string(APPEND text "static const deltac::TemplateFile kTemplateFiles[] = {\n")
foreach(name IN LISTS FILES)
  file(READ ${ROOT}/${name} body)
  string(APPEND text "  {\"${name}\", R\"deltac_tpl(${body})deltac_tpl\"},\n")
endforeach()
string(APPEND text "};\n")
file(WRITE ${OUT}.tmp "${text}")
# Only touch the output when it changed, so deltac is not relinked for nothing.
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
