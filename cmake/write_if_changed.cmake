# write_if_changed(<file> <text>): writes only on change, so that unchanged embedded data
# does not trigger a rebuild. Included by the embedding scripts (cmake -P).
function(write_if_changed file text)
  if(EXISTS ${file})
    file(READ ${file} old)
    if(old STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE ${file} "${text}")
endfunction()
